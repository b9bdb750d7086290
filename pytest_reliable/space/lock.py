"""reliable.lock: every space's normalized declaration and hash; how declared spaces differ."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_reliable.errors import LockError
from pytest_reliable.files import write_atomic
from pytest_reliable.space.core import Space
from pytest_reliable.space.dimensions import KEYS

LOCK_VERSION = 1


@dataclass(frozen=True)
class LockDifference:
    """One space that differs from reliable.lock."""

    space: str
    dimensions: tuple[str, ...] = ()
    missing: bool = False

    def describe(self) -> str:
        if self.missing:
            return f"space {self.space!r}: missing from the lock"
        return f"space {self.space!r}: changed " + ", ".join(self.dimensions)


def write_lock(path: str | Path, spaces: Mapping[str, Space]) -> None:
    """Write every space's normalized declaration and hash (JSON, sorted keys)."""
    content = {
        "version": LOCK_VERSION,
        "spaces": {name: {"hash": space.hash, "declaration": space.normalized()}
                   for name, space in sorted(spaces.items())},
    }
    write_atomic(path, json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_lock(path: str | Path) -> dict[str, dict[str, Any]]:
    """Space name -> {"hash", "declaration"}; LockError when unreadable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        spaces = data["spaces"]
        if not isinstance(spaces, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("declaration", {}), dict)
                for v in spaces.values()):
            raise TypeError
        return {str(k): dict(v) for k, v in spaces.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise LockError(f"{path}: not a readable reliable.lock. Fix: rewrite it with "
                        "--reliable-lock-update and commit it.") from None


def compare_lock(spaces: Mapping[str, Space], lock: Mapping[str, Mapping[str, Any]]
                 ) -> list[LockDifference]:
    """The declared spaces that are missing from ``lock`` or differ from it."""
    out: list[LockDifference] = []
    for name, space in sorted(spaces.items()):
        entry = lock.get(name)
        if entry is None:
            out.append(LockDifference(name, missing=True))
            continue
        if entry.get("hash") == space.hash:
            continue
        locked = entry.get("declaration") or {}
        mine = space.normalized()
        changed = tuple(k for k in KEYS if mine.get(k) != locked.get(k))
        out.append(LockDifference(name, changed or ("declaration",)))
    return out



def lock_update_summary(before: Mapping[str, Mapping[str, Any]],
                        after: Mapping[str, Mapping[str, Any]]) -> str:
    """What a rewrite of reliable.lock changed, one phrase per space (both sides as
    `read_lock` returns them): ``mcq 1a2b3c4d5e6f (changed: wrapper)``, ``yn ... (new)``,
    ``old (dropped)``, or unchanged."""
    parts = []
    for name, entry in sorted(after.items()):
        shown = f"{name} {str(entry.get('hash', ''))[:12]}"
        old = before.get(name)
        if old is None:
            parts.append(f"{shown} (new)")
        elif old.get("hash") != entry.get("hash"):
            mine, locked = entry.get("declaration") or {}, old.get("declaration") or {}
            changed = [k for k in KEYS if mine.get(k) != locked.get(k)] or ["declaration"]
            parts.append(f"{shown} (changed: {', '.join(changed)})")
        else:
            parts.append(f"{shown} (unchanged)")
    parts += [f"{name} (dropped)" for name in sorted(set(before) - set(after))]
    return ", ".join(parts) if parts else "no spaces"
