"""The manual's code blocks, read as tests read them (tests/test_docs.py).

Every fenced block of README.md and docs/*.md carries a mark on the line before it saying how it
is checked, so a block nobody checks cannot be added:

    <!-- doc-test: KIND [key=value ...]
    optional lines (a type-checked fragment's prelude)
    -->

Kinds, and the languages each may mark:

- ``file PATH in=P[,Q]`` (python, yaml, ini, json, toml): the block is the file PATH of the
  example projects P, Q. A project is every file marked for it, across the pages; its ``run``
  blocks execute in a fresh copy of it.
- ``run in=P [env=scripted[,postgres]] [exit=N] [expect=TEXT]`` (bash, python): executed in a
  copy of project P: a bash block as one ``bash -eu`` script, a python block as a script. With
  ``env=scripted`` a scripted OpenAI-compatible server (`DOCS_RULE`) answers for OpenAI's API
  (``OPENAI_BASE_URL``, ``RELIABLE_BASE_URL``, ``OPENAI_API_KEY``); with ``postgres``,
  ``RELIABLE_STORE`` names a fresh database of a throwaway PostgreSQL server.
- ``typecheck [in=P]`` (python): a fragment, checked by ``mypy --strict`` with the mark's extra
  lines as its prelude (and P's modules importable).
- ``ci`` (bash): every command is a line of ``.ci/run``, verbatim.
- ``quickstart`` (bash), ``output quickstart`` (text): README's quick start, run in a fresh
  virtual environment by ``test_readme_quick_start_runs_as_written_in_a_fresh_venv``.
- ``console in=examples`` (text): ``$ `` lines are commands run in a directory holding a copy
  of ``examples/``; the lines after them are output that must appear, in order.
- ``benchmark`` (bash): ``python benchmarks/X.py ARGS`` commands; the script exists and its
  own argument parser accepts ARGS (the measurement itself is not re-run: minutes to hours).
- ``install`` (bash): ``pip install`` lines; the extras exist in pyproject.toml and the other
  packages are installed in the test environment.
- ``parse`` (yaml, json, ini, toml): parsed only (e.g. a GitHub Actions workflow).
- ``recorded`` (text): a benchmark's recorded output; the page runs that benchmark's command
  in a ``benchmark`` block before it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGES: tuple[Path, ...] = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

KINDS: dict[str, frozenset[str]] = {
    "file": frozenset({"python", "yaml", "ini", "json", "toml"}),
    "run": frozenset({"bash", "python"}),
    "typecheck": frozenset({"python"}),
    "ci": frozenset({"bash"}),
    "quickstart": frozenset({"bash"}),
    "output": frozenset({"text"}),
    "console": frozenset({"text"}),
    "benchmark": frozenset({"bash"}),
    "install": frozenset({"bash"}),
    "parse": frozenset({"yaml", "json", "ini", "toml"}),
    "recorded": frozenset({"text"}),
}
"""Each mark's kind and the fence languages it may mark."""

_FENCE = re.compile(r"^(`{3,}|~{3,})([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*doc-test:\s*(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block and its mark (``kind`` None: unmarked)."""

    page: str
    line: int
    """1-based line of the opening fence."""
    lang: str
    text: str
    kind: str | None = None
    args: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    prelude: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def projects(self) -> tuple[str, ...]:
        given = self.options.get("in")
        return tuple(given.split(",")) if given else ()

    @property
    def env(self) -> frozenset[str]:
        given = self.options.get("env")
        return frozenset(given.split(",")) if given else frozenset()


def _mark(lines: Sequence[str], fence: int) -> tuple[str, str] | None:
    """(the mark's first line after ``doc-test:``, its further lines) when the line before
    ``fence`` closes a doc-test comment."""
    end = fence - 1
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return None
    start = end
    while start >= 0 and not _MARK.match(lines[start]):
        if start < end and lines[start].rstrip().endswith("-->"):
            return None  # another comment: this one is not a doc-test mark
        start -= 1
    if start < 0:
        return None
    first = _MARK.match(lines[start])
    assert first is not None
    head = first.group(1)
    body = lines[start + 1:end + 1]
    if start == end:
        head = head.rstrip().removesuffix("-->")
        body = []
    else:
        body[-1] = body[-1].rstrip().removesuffix("-->")
    return head.strip(), "\n".join(body).strip()


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of a Markdown page, with its mark."""
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.group(1), opening.group(2) or "text"
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        text = "\n".join(lines[i + 1:j]) + "\n"
        mark = _mark(lines, i)
        if mark is None:
            found.append(Block(page, i + 1, lang, text))
        else:
            head, prelude = mark
            words = shlex.split(head)
            kind = words[0] if words else ""
            args = tuple(w for w in words[1:] if "=" not in w)
            options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
            found.append(Block(page, i + 1, lang, text, kind, args, options, prelude))
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks_of(page)]


def projects(blocks: Sequence[Block]) -> dict[str, dict[str, str]]:
    """{project: {path: text}} from every ``file`` block."""
    out: dict[str, dict[str, str]] = {}
    for block in blocks:
        if block.kind != "file":
            continue
        (path,) = block.args
        for project in block.projects:
            files = out.setdefault(project, {})
            assert path not in files, f"{block.id}: {project}/{path} is given twice"
            files[path] = block.text
    return out


def write_project(files: dict[str, str], where: Path) -> None:
    for name, text in files.items():
        target = where / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def commands(block: Block) -> list[str]:
    """The block's commands: lines joined at a trailing backslash, comments and blanks left out."""
    out: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def without_comment(command: str) -> str:
    """A command without its trailing ``  # ...`` comment (outside quotes)."""
    quote = ""
    for i, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command


# -- the scripted model the manual's runs talk to -------------------------------------------------
_ROUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("billing", ("charged", "invoice", "refund", "payment", "card")),
    ("bug", ("crash", "error", "does nothing", "freezes", "blank page")),
    ("account", ("password", "email address", "log in", "two-factor", "close my account")),
)
_SENTIMENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("positive", ("excellent", "love", "perfectly", "great", "exceeded", "best")),
    ("negative", ("broke", "terrible", "waste", "stopped", "worst")),
)
_HELP = (
    ("password", "Use 'Forgot password' on the sign-in page; the link is valid for an hour."),
    ("refund", "Refunds are possible within 30 days of purchase."),
    ("invoice", "Go to Settings, Billing, Invoices: each month is a PDF."),
    ("export", "Settings, Privacy, Export: a ZIP file arrives by email."),
    ("share", "Each person needs an account of their own."),
    ("two-factor", "Settings, Security, Two-factor authentication."),
)


def _text_of(messages: Any) -> tuple[str, str]:
    """(the system messages, the rest) as text."""
    if isinstance(messages, str):
        return "", messages
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    rest = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
    return system, rest


def _answer_in(text: str, label: str) -> str:
    found = re.search(rf"^{label}: (.*)$", text, re.MULTILINE)
    return found.group(1) if found else ""


def _by_keywords(text: str, table: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    return next((label for label, words in table if any(w in text for w in words)),
                "I am not sure.")


def docs_rule(messages: Any, params: dict[str, Any]) -> str:
    """A deterministic stand-in for a capable model, for the manual's examples: it grades as a
    judge (a short answer fails; of two answers the longer wins), adds numbers, routes tickets
    and reads reviews by keywords, and answers help questions (a little longer behind the help
    app's system prompt); anything else it cannot answer."""
    system, text = _text_of(messages)
    everything = f"{system}\n{text}"
    if "Reply with PASS or FAIL only" in everything:
        return "PASS" if len(_answer_in(text, "Answer")) >= 20 else "FAIL"
    if "on a scale from 1" in everything:
        return "4" if len(_answer_in(text, "Answer")) >= 20 else "2"
    if "Reply with 1 or 2 only" in everything:
        first, second = _answer_in(text, "Answer 1"), _answer_in(text, "Answer 2")
        return "1" if len(first) >= len(second) else "2"
    total = re.search(r"What is (\d+) \+ (\d+)\?", text)
    if total:
        return str(int(total.group(1)) + int(total.group(2)))
    lowered = text.lower()
    if "billing" in lowered and "bug" in lowered:
        return _by_keywords(lowered, _ROUTES)
    if "positive" in lowered and "negative" in lowered:
        return _by_keywords(lowered, _SENTIMENTS)
    for topic, answer in _HELP:
        if topic in lowered:
            return answer + (" Happy to help!" if "our product" in system else "")
    return "I am not sure."


DOCS_RULE = docs_rule


def iter_marked(kind: str) -> Iterator[Block]:
    return (block for block in all_blocks() if block.kind == kind)
