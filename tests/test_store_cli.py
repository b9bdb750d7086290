"""``python -m pytest_reliable cache merge|export|import``: insert-or-ignore, conflicts counted
(the first answer kept), bad input named with exit code 2, never a traceback or a password."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_reliable.cli.main import main
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
            "from pytest_reliable.cli.main import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", hide, "cache", "import", str(good), "--store",
                           "postgresql://u:pw-secret@127.0.0.1:1/db"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert 'pip install "pytest-reliable[postgres]"' in done.stderr
    assert "pw-secret" not in done.stderr and "Traceback" not in done.stderr


def test_rows_that_are_not_answers_are_left_out_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache file another tool touched: a text that is not UTF-8, a NULL text, token counts
    and a latency that are not numbers, log-probabilities that are not JSON. The merge copies
    what is an answer, says what it left out and why, and never turns NULL into ''."""
    source = tmp_path / "touched.sqlite"
    with sqlite3.connect(source) as db:  # as an older tool made it: its text may be NULL
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT, logprobs TEXT, "
                   "prompt_tokens INTEGER, completion_tokens INTEGER, latency_s REAL, extra TEXT,"
                   " model TEXT, meta TEXT, created REAL)")
        insert = ("INSERT INTO responses(key, text, logprobs, prompt_tokens, completion_tokens, "
                  "latency_s, extra, model, meta, created) VALUES (?, ?, ?, ?, ?, ?, '{}', 'm', "
                  "'{}', ?)")
        db.execute(insert, ("good", "fine", None, 1, 1, 0.5, 0))
        db.execute(insert.replace("?, ?, ?, ?", "?, CAST(X'ff61' AS TEXT), ?, ?", 1),
                   ("not-utf8", None, 1, 1, 0.5, 0))
        db.execute(insert, ("null-text", None, None, 1, 1, 0.5, 0))
        db.execute(insert, ("numbers", "kept", None, "many", "xyz", "slow", "yesterday"))
        db.execute(insert, ("broken-json", "text", "[{", 1, 1, 0.5, 0))
    db.close()
    merged = tmp_path / "merged.sqlite"
    code, text = run(capsys, "cache", "merge", str(source), "-o", str(merged))
    assert code == 0, text
    assert "Traceback" not in text
    assert stored(merged) == {"good": "fine", "numbers": "kept"}
    assert "3 rows left out, not answers" in text
    for why in ("key not-utf8: its text is not UTF-8", "key null-text: its text is NULL",
                "key broken-json: its log-probabilities or extras are not JSON"):
        assert why in text, text
    with LocalStore(merged, "none") as replay:
        assert replay.get("numbers") == ModelResponse("kept")  # its numbers read as unknown
        assert replay.get("null-text") is None


RSS_PROBE = """
import sys
from pathlib import Path
from pytest_reliable.cli.main import main
from pytest_reliable.cli.cache import run_cache  # imported before the baseline

def peak_kb():  # VmHWM: this process's peak resident memory (ru_maxrss counts the parent's too)
    status = Path("/proc/self/status").read_text()
    return int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])

before = peak_kb()
code = main(sys.argv[1:])
print(f"RSS {code} {before} {peak_kb()}", file=sys.stderr)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("command", ["merge", "export"])
def test_cache_commands_hold_a_few_megabytes_of_answers_not_the_store(
    tmp_path: Path, command: str, request: pytest.FixtureRequest
) -> None:
    """120 MB of answers (30 of 4 MB) go through in bounded chunks: the command's peak memory
    grows by far less than the store (it held 2,000 answers at once before)."""
    big = {f"k{i:02d}": f"{i:02d}" + "x" * (4 * 1024 * 1024) for i in range(30)}
    source = make_cache(tmp_path / "big.sqlite", big)
    if command == "merge":
        argv = ["cache", "merge", str(source), "-o", str(tmp_path / "merged.sqlite")]
        out = tmp_path / "merged.sqlite"
    else:
        url = request.getfixturevalue("postgres_url")
        main(["cache", "import", str(source), "--store", url])
        argv = ["cache", "export", "--store", url, "-o", str(tmp_path / "exported.sqlite")]
        out = tmp_path / "exported.sqlite"
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, *argv], capture_output=True,
                          text=True, timeout=300, check=False)
    line = next(line for line in done.stderr.splitlines() if line.startswith("RSS "))
    code, before, after = (int(v) for v in line.split()[1:])
    assert code == 0, done.stdout + done.stderr
    grown_mb = (after - before) / 1024
    assert grown_mb < 60, f"{grown_mb:.0f} MB more at the peak for 120 MB of answers"
    assert len(stored(out)) == 30
