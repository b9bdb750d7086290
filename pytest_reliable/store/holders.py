"""Which process holds a lock on a file: for messages about a locked sqlite file.

sqlite locks with POSIX record locks, which Linux lists in ``/proc/locks`` with the holder's pid
and the file's device and inode. Elsewhere (or when the holder is in another pid namespace) this
finds nobody and the message says "another process".
"""

from __future__ import annotations

import os
from pathlib import Path


def _lock_ids(paths: list[Path]) -> set[tuple[int, int, int]]:
    ids = set()
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        ids.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    return ids


def lock_holders(path: Path) -> list[int]:
    """Pids (other than this one) holding a lock on ``path`` or its ``-wal``/``-shm`` files;
    write locks first."""
    files = _lock_ids([path, Path(f"{path}-wal"), Path(f"{path}-shm")])
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    writers: list[int] = []
    others: list[int] = []
    for line in lines:
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:56789 0 EOF" ("->" marks a blocked waiter)
        if "->" in fields or len(fields) < 6:
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            ident = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if ident not in files or pid in (0, os.getpid()):
            continue
        target = writers if fields[3] == "WRITE" else others
        if pid not in writers and pid not in others:
            target.append(pid)
    return writers + others


def range_holders(path: Path, offsets: list[int]) -> dict[int, int]:
    """offset -> pid of the other process holding a one-byte lock at that offset of ``path``
    (the claims file's byte-range locks, `store.claims.FileClaims`)."""
    files = _lock_ids([path])
    wanted = set(offsets)
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return {}
    found: dict[int, int] = {}
    for line in lines:
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:56789 100 100"
        if "->" in fields or len(fields) < 8:
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            ident = (int(major, 16), int(minor, 16), int(inode))
            start = int(fields[6])
        except ValueError:
            continue
        if ident in files and start in wanted and pid not in (0, os.getpid()):
            found[start] = pid
    return found


def describe_process(pid: int) -> str:
    """``pid 1234: python hold.py`` (the command line cut to 80 characters) or ``pid 1234``."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"pid {pid}"
    command = " ".join(" ".join(part.decode("utf-8", "replace").split())
                       for part in raw.split(b"\0") if part)
    if len(command) > 80:
        command = command[:77] + "..."
    return f"pid {pid}: {command}" if command else f"pid {pid}"


def who_holds(path: Path) -> str:
    """"another process (pid 1234: python hold.py)" or "another process"."""
    holders = lock_holders(path)
    if not holders:
        return "another process"
    named = ", ".join(describe_process(pid) for pid in holders[:3])
    return f"another process ({named})"


__all__ = ["describe_process", "lock_holders", "range_holders", "who_holds"]
