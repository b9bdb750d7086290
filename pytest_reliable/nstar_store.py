"""The n* store of ``--reliable-n auto`` (SPEC section 7), in ``.reliable/n_star/``.

One small JSON file per key, written atomically (temp file + ``os.replace``), so concurrent
pytest-xdist workers never lose or corrupt each other's entries. It is not the response cache:
``--reliable-no-cache`` leaves it alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class NStarKey:
    nodeid: str
    space_hash: str
    dataset_hash: str
    reference_model: str
    mode: str
    eps: float
    delta: float
    seed: int
    pilot_n: int

    def digest(self) -> str:
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class NStarStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, key: NStarKey) -> Path:
        return self.directory / f"{key.digest()}.json"

    def get(self, key: NStarKey) -> dict[str, Any] | None:
        try:
            record = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if record.get("key") == asdict(key) else None

    def put(self, key: NStarKey, *, n_star: int, reliable: bool, achievable_eps: float) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {
            "key": asdict(key),
            "n_star": n_star,
            "reliable": reliable,
            "achievable_eps": achievable_eps,
        }
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".n_star-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle, indent=2)
            os.replace(tmp, self._path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
