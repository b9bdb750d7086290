"""The concise per-test properties written into JUnit XML (``record_property``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pytest_reliable.report.format import get

if TYPE_CHECKING:
    from pytest_reliable.schema.entries import ChecklistEntry, Entry, ReliableEntry


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def junit_properties(entry: Entry) -> list[tuple[str, str]]:
    """``entry``: complete, as the engine writes it and `schema.load` reads it."""
    if entry.get("kind") == "reliable":
        reliable = cast("ReliableEntry", entry)
        fields = {
            "mean": reliable["mean"],
            "std": reliable["std"],
            "canonical": get(entry, "canonical", "score"),
            "wilson_low": get(entry, "canonical", "wilson_low"),
            "wilson_high": get(entry, "canonical", "wilson_high"),
            "formats_min": get(entry, "formats", "min"),
            "formats_max": get(entry, "formats", "max"),
            "orders_min": get(entry, "orders", "min"),
            "orders_max": get(entry, "orders", "max"),
            "pass_at_k": reliable["pass_at_k"],
            "pass_hat_k": reliable["pass_hat_k"],
            "n_star": reliable["n_star"],
            "baseline_model": get(entry, "baseline", "model"),
            "baseline_difference": get(entry, "baseline", "difference", "estimate"),
            "baseline_difference_low": get(entry, "baseline", "difference", "low"),
            "baseline_difference_high": get(entry, "baseline", "difference", "high"),
            "baseline_mcnemar_p": get(entry, "baseline", "mcnemar_p"),
        }
    else:
        checklist = cast("ChecklistEntry", entry)
        interval = checklist["interval"] or [None, None]
        fields = {"rate": checklist["rate"], "interval_low": interval[0],
                  "interval_high": interval[1], "pairs": checklist["pairs"]}
    fields.update({"verdict": entry.get("verdict"), "space_hash": entry.get("space_hash")})
    return [(f"reliable_{name}", _value(value)) for name, value in fields.items()
            if value is not None]
