"""What an unnamed callable's identity costs: hashing its module and the project modules it imports.

A generated project of ``--modules`` modules (default 50) in five subpackages, each module about
``--lines`` lines of functions (default 200), importing three earlier modules of the project (one
of them the one just before, so the walk reaches every module) plus a few of the standard library
(json, re, dataclasses, typing); the app's entry module imports the last five. The project is
imported once (what the user's run pays anyway: that import is the baseline measured in the same
run), then:

- cold: a new run (`ProjectModules`) in a process that never read these files;
- new run, parsed again: another `ProjectModules` with the per-content import cache emptied;
- new run: another `ProjectModules` (files read and hashed again; imports kept per content);
- per test: the same `ProjectModules` again (what every test after the first pays);
- before issue 28: the function's own source hashed (`inspect.getsource`), for scale.

Target: the cold walk costs less than importing the project (ratio < 1), and a test after the
first well under a millisecond.

    python benchmarks/bench_identity.py [--modules 50] [--lines 200] [--reps 20]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_reliable.models import identity
from pytest_reliable.models.identity import ProjectModules

PACKAGES = 5


def module_source(index: int, names: list[str], lines: int, rng: random.Random) -> str:
    # The one before (so the walk reaches every module) and two others before it.
    earlier = names[index - 1:index] + rng.sample(names[:max(0, index - 1)], min(2, index - 1)) \
        if index else []
    out = ["import json", "import re", "from dataclasses import dataclass",
           "from typing import Any", *[f"import {name}" for name in earlier], ""]
    out.append(f'PROMPT_{index} = "You are module {index}. Answer briefly."')
    body = 0
    while len(out) < lines:
        out += [f"def helper_{body}(text: str) -> str:",
                f"    data = json.dumps({{'text': text, 'n': {body}}})",
                "    return re.sub(r'\\s+', ' ', data)", "", ""]
        body += 1
    return "\n".join(out) + "\n"


def write_project(root: Path, modules: int, lines: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    names = []
    (root / "proj").mkdir()
    (root / "proj" / "__init__.py").write_text("")
    for p in range(PACKAGES):
        (root / "proj" / f"pkg{p}").mkdir()
        (root / "proj" / f"pkg{p}" / "__init__.py").write_text("")
    for i in range(modules):
        names.append(f"proj.pkg{i % PACKAGES}.mod{i}")
    for i, name in enumerate(names):
        path = root / Path(*name.split(".")).with_suffix(".py")
        path.write_text(module_source(i, names, lines, rng))
    imports = "\n".join(f"import {name}" for name in names[-5:])
    (root / "proj" / "app.py").write_text(
        f"{imports}\n\n\ndef classify(review: str) -> str:\n    return review\n")
    return names


def timed(fn: object, reps: int) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--modules", type=int, default=50)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_project(root, args.modules, args.lines)
        sys.path.insert(0, str(root))
        start = time.perf_counter()
        app = importlib.import_module("proj.app")
        imported = time.perf_counter() - start
        classify = app.classify

        start = time.perf_counter()
        found = ProjectModules(root).identity_of(classify)
        cold = time.perf_counter() - start
        hashed = len(found.files)
        assert found.run_scoped is None and hashed == args.modules + 1 + PACKAGES + 1, found.files

        new_run = timed(lambda: ProjectModules(root).identity_of(classify), args.reps)
        run = ProjectModules(root)
        run.identity_of(classify)
        per_test = timed(lambda: run.identity_of(classify), args.reps * 10)
        before = timed(lambda: hashlib.sha256(inspect.getsource(classify).encode()).hexdigest(),
                       args.reps * 10)
        identity._IMPORTS.clear()
        reparsed = timed(lambda: (identity._IMPORTS.clear(),
                                  ProjectModules(root).identity_of(classify)), args.reps)

    print(f"identity of an app over {args.modules} project modules of ~{args.lines} lines "
          f"({hashed} files hashed):")
    print(f"  importing the project (baseline, once): {imported * 1e3:8.2f} ms")
    print(f"  cold walk, first in the process:        {cold * 1e3:8.2f} ms  "
          f"(ratio to the import: {cold / imported:.2f})")
    print(f"  a new run, every file parsed again:     {reparsed * 1e3:8.2f} ms  "
          f"(ratio: {reparsed / imported:.2f})")
    print(f"  a new run, parses kept per content:     {new_run * 1e3:8.2f} ms")
    print(f"  every later test of the run:            {per_test * 1e3:8.3f} ms")
    print(f"  before issue 28 (function source only): {before * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
