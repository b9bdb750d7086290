"""The n* store of ``--reliable-n auto`` (SPEC section 7), in ``.reliable/n_star/``.

One small JSON file per key, written atomically (temp file + ``os.replace``), so concurrent
pytest-xdist workers never lose or corrupt each other's entries. It is not the response cache:
``--reliable-no-cache`` leaves it alone. An entry that cannot be read or has the wrong shape (an
older version's, a hand edit) is treated as absent with a warning: the pilot runs again.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeGuard

from pytest_reliable.files import content_hash, write_atomic


class NStarStoreWarning(UserWarning):
    """A stored n* entry was unusable and is ignored (the pilot runs again)."""


@dataclass(frozen=True)
class NStarKey:
    """Everything that changes n*: a different value is a different entry."""

    nodeid: str
    space_hash: str
    dataset_hash: str
    reference_model: str
    mode: str
    eps: float
    delta: float
    seed: int
    pilot_n: int
    n_star_method: str = "bootstrap"
    n_max: int = 1000

    def digest(self) -> str:
        return content_hash(asdict(self))[:32]


@dataclass(frozen=True)
class NStarEntry:
    """What a pilot found: n* (uncapped), whether it is reliable, the eps it vouches for."""

    n_star: int
    reliable: bool
    achievable_eps: float
    n_star_paper: int | None = None
    """The paper's n* from the same pilot (``bootstrap`` entries only)."""

    @classmethod
    def from_record(cls, record: Any) -> NStarEntry | None:
        """The entry of a stored record, or None when a field is missing or of the wrong type."""
        if not isinstance(record, dict):
            return None
        n_star, reliable = record.get("n_star"), record.get("reliable")
        eps, paper = record.get("achievable_eps"), record.get("n_star_paper")
        if not (_is_int(n_star) and n_star >= 1 and isinstance(reliable, bool)):
            return None
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or math.isnan(eps):
            return None
        if paper is not None and not (_is_int(paper) and paper >= 1):
            return None
        return cls(n_star, reliable, float(eps), paper)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class NStarStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, key: NStarKey) -> Path:
        return self.directory / f"{key.digest()}.json"

    def get(self, key: NStarKey) -> NStarEntry | None:
        path = self._path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None  # no entry yet
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if isinstance(record, dict) and record.get("key") != asdict(key):
            return None  # a digest collision or another version's key: not ours
        entry = NStarEntry.from_record(record)
        if entry is None:
            warnings.warn(
                f"n* store entry {path} for {key.nodeid} is not a valid entry and is ignored: "
                "the pilot runs again and rewrites it.",
                NStarStoreWarning,
                stacklevel=2,
            )
        return entry

    def put(self, key: NStarKey, entry: NStarEntry) -> None:
        record = {"key": asdict(key), **asdict(entry)}
        write_atomic(self._path(key), json.dumps(record, indent=2))
