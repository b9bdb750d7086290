"""A throwaway PostgreSQL server for tests and benchmarks: the real thing, never a mock.

`TemporaryPostgres` runs ``initdb`` and ``pg_ctl`` from Debian's ``postgresql`` package (or any
PostgreSQL whose binaries are on PATH) on a temporary directory, listening on 127.0.0.1 at a free
port with password authentication (scram-sha-256), as the ``postgres`` user when run as root
(PostgreSQL refuses to run as root). ``stop`` ends the server and removes the directory; the
context manager does both.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

USER = "reliable"
PASSWORD = "pg-secret-Xq7"


class PostgresNotFound(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


def find_bindir() -> Path:
    """The directory of ``pg_ctl``/``initdb``: PATH first, then Debian's versioned directories."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                      else 0)
    if versions:
        return versions[-1].parent
    raise PostgresNotFound("PostgreSQL is not installed: apt-get install -y postgresql "
                           "(Debian), or put pg_ctl and initdb on PATH")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    def __init__(self, settings: Sequence[str] = ("fsync=off",)) -> None:
        """``settings``: extra server settings (``name=value``); tests turn fsync off for speed,
        a benchmark passes ``()`` to measure the defaults."""
        self.bindir = find_bindir()
        self.settings = tuple(settings)
        self.user = USER
        self.password = PASSWORD
        self.host = "127.0.0.1"
        self.port = 0
        self.root: Path | None = None
        self._as_postgres = os.geteuid() == 0

    # -- paths ---------------------------------------------------------------------------------
    @property
    def data(self) -> Path:
        assert self.root is not None, "not started"
        return self.root / "data"

    def url(self, dbname: str = "postgres", *, password: str | None = None,
            with_password: bool = True) -> str:
        secret = f":{password or self.password}" if with_password else ""
        return f"postgresql://{self.user}{secret}@{self.host}:{self.port}/{dbname}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        extra: dict[str, Any] = {"user": "postgres", "group": "postgres"} if self._as_postgres else {}
        return subprocess.run([str(self.bindir / args[0]), *args[1:]], capture_output=True,
                              text=True, check=check, cwd=self.root, timeout=120, **extra)

    # -- life ----------------------------------------------------------------------------------
    def start(self) -> TemporaryPostgres:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="reliable-pg-"))
            os.chmod(self.root, 0o755)
            if self._as_postgres:
                shutil.chown(self.root, "postgres", "postgres")
            pwfile = self.root / "pw"
            pwfile.write_text(self.password + "\n")
            if self._as_postgres:
                shutil.chown(pwfile, "postgres", "postgres")
            self._run("initdb", "-D", str(self.data), "-U", self.user, f"--pwfile={pwfile}",
                      "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8",
                      "--locale=C", "--no-sync")
            pwfile.unlink()
        if self.running():
            return self
        self.port = self.port or free_port()
        options = [f"-p {self.port}", "-c listen_addresses=127.0.0.1",
                   f"-c unix_socket_directories={self.root}"]
        options += [f"-c {setting}" for setting in self.settings]
        result = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                           "-w", "-t", "60", "-o", " ".join(options), "start", check=False)
        if result.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            self.stop()
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log}")
        return self

    def running(self) -> bool:
        if self.root is None or not (self.data / "postmaster.pid").exists():
            return False
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def stop_server(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server, keep its files (``start`` brings it back on the same port)."""
        if self.root is None or not (self.data / "postmaster.pid").exists():
            return
        result = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30",
                           "stop", check=False)
        if result.returncode != 0:
            self._kill()

    def _kill(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        if self.root is None:
            return
        self.stop_server("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> TemporaryPostgres:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- databases -----------------------------------------------------------------------------
    def admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.url("postgres"), autocommit=True)

    def create_database(self, name: str | None = None) -> str:
        """A fresh, empty database; returns its URL (with the password)."""
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def execute(self, dbname: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            cursor = conn.execute(sql, params or None)
            return list(cursor.fetchall()) if cursor.description else []


__all__ = ["PASSWORD", "USER", "PostgresNotFound", "TemporaryPostgres", "find_bindir", "free_port"]
