"""Content hashes and atomic file writes: the one place each is written.

Every hash the plugin publishes or keys on (cache keys, space and dataset hashes, the n* store's
keys, format keys) is the sha256 of one canonical JSON text, so the same value hashes the same in
every module. Every file other processes may read while it is written (the JSON report, the HTML
page, ``reliable.lock``, the n* store) is written to a temporary file of its own in the target's
directory and renamed over the target: a reader sees the old file or the new one, never half of one,
and two writers (xdist workers) never share a temporary name.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def canonical_json(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON with sorted keys and text kept as text (not ``\\u`` escapes)."""
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def sha256_hex(text: str) -> str:
    """sha256 of the UTF-8 text; a lone surrogate (a model can answer one) is hashed, not an error."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def content_hash(value: Any, *, sort_keys: bool = True) -> str:
    """sha256 hex of ``canonical_json(value)``."""
    return sha256_hex(canonical_json(value, sort_keys=sort_keys))


def write_atomic(path: str | Path, data: str | bytes, *, shared: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file + ``os.replace``); returns the path.

    ``shared`` gives the file the mode an ordinary write would (0666 minus the umask) instead of
    the temporary file's private 0600: reports and pages are for other people and other tools.

    A symlink is written through (its target gets the content, the link stays); a directory, a
    device or a FIFO is refused (``os.replace`` would replace the node itself, e.g. /dev/null).
    """
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        raise OSError(errno.EISDIR if target.is_dir() else errno.EINVAL,
                      "not a regular file; refusing to replace it", str(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-", suffix=".tmp")
    try:
        if shared:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
