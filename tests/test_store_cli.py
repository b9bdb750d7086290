"""``python -m pytest_reliable cache merge|export|import``: insert-or-ignore, conflicts counted
(the first answer kept), bad input named with exit code 2, never a traceback or a password."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_reliable.__main__ import main
from pytest_reliable.models.base import ModelResponse
from pytest_reliable.store import LocalStore
from pytest_reliable.testing.postgres import PASSWORD, TemporaryPostgres, free_port


def make_cache(path: Path, answers: dict[str, str]) -> Path:
    with LocalStore(path) as store:
        for key, text in answers.items():
            store.put(key, ModelResponse(text), meta={"model": "m"})
    return path


def stored(path: Path) -> dict[str, str]:
    with LocalStore(path, "none") as store:
        return {row.key: row.text for batch in store.rows() for row in batch}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_merge_keeps_the_first_answer_and_counts_conflicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_cache(tmp_path / "a.sqlite", {"k1": "a1", "k2": "b"})
    b = make_cache(tmp_path / "b.sqlite", {"k2": "b", "k3": "c", "k1": "other"})
    merged = tmp_path / "out" / "merged.sqlite"
    code, text = run(capsys, "cache", "merge", str(a), str(b), "-o", str(merged))
    assert code == 0, text
    assert stored(merged) == {"k1": "a1", "k2": "b", "k3": "c"}
    assert "3 answers added, 1 conflicting (the first kept)" in text
    assert f"{b}: 3 answers (1 added, 1 already there, 1 conflicting (the first kept))" in text
    # the merged file is an ordinary cache: a replay reads it
    with LocalStore(merged, "none") as replay:
        assert replay.get("k3") == ModelResponse("c")
    # merging into an existing output keeps its answers first
    c = make_cache(tmp_path / "c.sqlite", {"k3": "changed", "k4": "d"})
    code, text = run(capsys, "cache", "merge", str(c), "-o", str(merged))
    assert code == 0 and stored(merged)["k3"] == "c" and stored(merged)["k4"] == "d"


def bad_files(tmp_path: Path) -> dict[str, Path]:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not sqlite at all " * 200)
    foreign = tmp_path / "songs.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE songs (title TEXT)")
    db.close()
    newer = make_cache(tmp_path / "newer.sqlite", {"k": "x"})
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.close()
    return {"does not exist": tmp_path / "missing.sqlite", "is a directory": directory,
            "is not a pytest-reliable cache": garbage, "no responses table": foreign,
            "newer pytest-reliable": newer}


def test_merge_names_each_bad_input_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = make_cache(tmp_path / "good.sqlite", {"k": "x"})
    out = tmp_path / "merged.sqlite"
    for why, path in bad_files(tmp_path).items():
        code, text = run(capsys, "cache", "merge", str(good), str(path), "-o", str(out))
        assert code == 2, (why, text)
        assert str(path) in text and why in text, (why, text)
        assert "Traceback" not in text
    assert not out.exists()  # nothing written when an input is bad
    code, text = run(capsys, "cache", "merge", str(good), "-o", str(good))
    assert code == 2 and "also an input" in text
    code, text = run(capsys, "cache", "merge", str(good), "-o", str(tmp_path / "a-directory"))
    assert code == 2 and "a-directory" in text and "directory" in text


def test_export_and_import_through_a_postgresql_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    a = make_cache(tmp_path / "shard-1.sqlite", {"k1": "a", "k2": "b"})
    b = make_cache(tmp_path / "shard-2.sqlite", {"k2": "b", "k3": "c", "k1": "other"})
    code, text = run(capsys, "cache", "import", str(a), "--store", postgres_url)
    assert code == 0 and "2 answers (2 added)" in text, text
    code, text = run(capsys, "cache", "import", str(b), "--store", postgres_url)
    assert code == 0 and "1 conflicting (the first kept)" in text, text
    assert PASSWORD not in text
    exported = tmp_path / "exported.sqlite"
    code, text = run(capsys, "cache", "export", "--store", postgres_url, "-o", str(exported))
    assert code == 0 and "3 answers (3 added)" in text, text
    assert stored(exported) == {"k1": "a", "k2": "b", "k3": "c"}
    assert PASSWORD not in text


def test_a_store_that_cannot_serve_exits_2_naming_host_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_server: TemporaryPostgres
) -> None:
    good = make_cache(tmp_path / "good.sqlite", {"k": "x"})
    port = free_port()
    for url, why in [
        (f"postgresql://reliable:{PASSWORD}@127.0.0.1:{port}/db", f"127.0.0.1:{port}"),
        (postgres_server.url("postgres", password="wrong-password-42"), "refused the password"),
        (postgres_server.url("no_such_db"), "createdb"),
        ("mysql://u:pw-secret@h/db", "postgresql://HOST:PORT/DATABASE"),
    ]:
        code, text = run(capsys, "cache", "import", str(good), "--store", url)
        assert code == 2 and why in text, (url, text)
        assert PASSWORD not in text and "wrong-password-42" not in text and "pw-secret" not in text
        assert "Traceback" not in text


def test_without_the_postgres_extra_the_fix_is_named(tmp_path: Path) -> None:
    good = make_cache(tmp_path / "good.sqlite", {"k": "x"})
    hide = ("import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None; "
            "from pytest_reliable.__main__ import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", hide, "cache", "import", str(good), "--store",
                           "postgresql://u:pw-secret@127.0.0.1:1/db"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert 'pip install "pytest-reliable[postgres]"' in done.stderr
    assert "pw-secret" not in done.stderr and "Traceback" not in done.stderr
