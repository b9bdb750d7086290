"""The plugin's overhead per evaluated test, with every model call cached.

Baseline (same run): a script that calls the core directly (`ReliableSession.run_reliable`, the
same evaluation, summary and thresholds the fixture runs) on the same cache. Both run in a fresh
interpreter, so both pay for imports; the ratio is plugin time / direct time, for 1 and 50 tests.

    python benchmarks/bench_plugin.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

INSTANCES = 20
RESAMPLINGS = 10

MODEL = '''
import re

def answer(prompt: str) -> str:
    found = re.search(r"^\\W*(\\w)\\W+\\s*right", prompt, re.M)
    return found.group(1) if found else "A"
'''

DATA = f'''
RECORDS = [
    {{"question": f"Question {{i}}?", "choices": ["wrong", "right answer", "also wrong", "no"],
     "answer": 1}}
    for i in range({INSTANCES})
]
'''

CONFTEST = '''
import pytest
from pytest_reliable import text_model
from bench_model import answer

@pytest.fixture
def reliable_model():
    return text_model(answer, id="bench-model")
'''

TESTS = '''
import pytest
from pytest_reliable import Dataset, MultipleChoice
from bench_data import RECORDS

DATA = Dataset.from_records(RECORDS)

@pytest.mark.parametrize("i", range({tests}))
@pytest.mark.reliable(n={n}, min_score=0.0)
def test_gate(reliable, i):
    reliable.evaluate(DATA, MultipleChoice())
'''

DIRECT = '''
import sys
from pathlib import Path
from pytest_reliable import Dataset, MultipleChoice, text_model
from pytest_reliable.contract.markers import ReliableSpec
from pytest_reliable.run.session import ReliableSession, Settings
from bench_data import RECORDS
from bench_model import answer

root = Path(sys.argv[1])
session = ReliableSession(Settings(rootdir=root))
model = text_model(answer, id="bench-model")
data = Dataset.from_records(RECORDS)
spec = ReliableSpec(n={n}, min_score=0.0)
for i in range({tests}):
    nodeid = f"test_bench.py::test_gate[{{i}}]"
    report = session.run_reliable(nodeid, data, MultipleChoice(), spec, model)
    assert report.passed
session.close()
'''


def run(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def measure(tests: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "bench_model.py").write_text(MODEL)
        (root / "bench_data.py").write_text(DATA)
        (root / "conftest.py").write_text(CONFTEST)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "test_bench.py").write_text(TESTS.format(tests=tests, n=RESAMPLINGS))
        (root / "direct.py").write_text(textwrap.dedent(DIRECT.format(tests=tests,
                                                                      n=RESAMPLINGS)))
        pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"]
        run(pytest_cmd, root)  # fill the cache: every later call is a hit
        plugin = min(run(pytest_cmd, root) for _ in range(3))
        direct = min(run([sys.executable, "direct.py", str(root)], root) for _ in range(3))
        return plugin, direct


def main() -> None:
    cells = INSTANCES * (RESAMPLINGS + 1)
    print(f"every call cached; {INSTANCES} instances x ({RESAMPLINGS} resamplings + 1) = "
          f"{cells} cells per test")
    for tests in (1, 50):
        plugin, direct = measure(tests)
        print(f"{tests:>3} tests: plugin {plugin:.2f} s ({plugin / tests * 1000:.0f} ms/test), "
              f"direct core {direct:.2f} s ({direct / tests * 1000:.0f} ms/test), "
              f"ratio {plugin / direct:.2f}")


if __name__ == "__main__":
    main()
