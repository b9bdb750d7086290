"""The argument checkers every stats module shares (private: no user calls them).

Each returns the clean value or raises ``ValueError`` naming the argument and its allowed range,
the package's convention; the array aliases are the package's vocabulary for inputs and outputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt


ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]


def _scores(values: ArrayLike, name: str = "scores") -> FloatArray:
    """``values`` as a 1-D float64 array; ValueError when empty, not 1-D, NaN or infinite."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a 1-D sequence of numbers") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of numbers, got {arr.ndim} dimensions")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty (need at least 1 score)")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN (every score must be a finite number)")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no inf)")
    return arr


def _paired(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> tuple[FloatArray, FloatArray]:
    x, y = _scores(a, name_a), _scores(b, name_b)
    if x.size != y.size:
        raise ValueError(
            f"{name_a} and {name_b} must have the same length (paired), got {x.size} and {y.size}"
        )
    return x, y


def _open_unit(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from exc
    if not 0.0 < v < 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be in (0, 1) (exclusive), got {value!r}")
    return v


def _count(value: Any, name: str, minimum: int = 0) -> int:
    """An integral count >= minimum (ints, numpy ints and integral floats are accepted)."""
    integral = not isinstance(value, bool) and (
        isinstance(value, (int, np.integer))
        or (isinstance(value, (float, np.floating)) and float(value).is_integer())
    )
    if not integral:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return v


def _positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}") from exc
    if not (math.isfinite(v) and v > 0.0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _score_matrix(scores: ArrayLike) -> FloatArray:
    try:
        s = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("scores must be a (resamplings, instances) matrix of numbers") from exc
    if s.ndim == 1:
        s = s[None, :]
    if s.ndim != 2 or s.size == 0:
        raise ValueError("scores must be a non-empty (resamplings, instances) matrix")
    if not np.isfinite(s).all() or s.min() < 0.0 or s.max() > 1.0:
        raise ValueError("scores must be finite numbers in [0, 1]")
    return s


def _matrix(values: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty (resamplings x instances) matrix")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must contain only finite scores")
    return arr
