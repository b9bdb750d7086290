"""What installing the plugin costs a pytest run that has no reliable test.

Baseline (same run): the same ``python -m pytest --co -q`` with the plugin disabled
(``-p no:reliable``), in a fresh interpreter each time, the two interleaved so that both see the
same machine load. The ratio is plugin-on time / plugin-off time (1.00: free); the last line says
which of numpy, scipy and statsmodels the plugin-on run imported (none is the promise).

    python benchmarks/bench_startup.py [rounds]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = '''
def test_one():
    assert 1 + 1 == 2


def test_two(tmp_path):
    assert tmp_path.is_dir()
'''

CONFTEST = '''
import sys


def pytest_collection_finish(session):
    heavy = sorted(name for name in ("numpy", "scipy", "statsmodels") if name in sys.modules)
    print("heavy modules:", heavy or "none")
'''

COMMAND = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly"]


def run(args: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "conftest.py").write_text(CONFTEST)
        (root / "test_plain.py").write_text(TESTS)
        on: list[float] = []
        off: list[float] = []
        heavy = ""
        for _ in range(rounds):
            seconds, out = run(COMMAND, root)
            on.append(seconds)
            heavy = next(line for line in out.splitlines() if line.startswith("heavy modules"))
            off.append(run([*COMMAND, "-p", "no:reliable"], root)[0])
    print(f"pytest --co -q on 2 plain tests, {rounds} interleaved runs each (min / median):")
    print(f"  plugin installed: {min(on):.3f} s / {statistics.median(on):.3f} s")
    print(f"  plugin disabled:  {min(off):.3f} s / {statistics.median(off):.3f} s")
    print(f"  ratio (min): {min(on) / min(off):.2f}, plugin cost {min(on) - min(off):+.3f} s")
    print(f"  {heavy} (plugin installed)")


if __name__ == "__main__":
    main()
