"""Plan + render 100 resamplings x 1,000 instances (100,000 prompts) under the default space.

Run: ``python benchmarks/bench_plan_render.py``. Target: under 2 s in total. The baseline renders
the same cells with the per-variant fragment cache cleared before every prompt (what rendering
costs without it), timed on a 10,000-prompt slice and scaled.
"""

from __future__ import annotations

import time

from pytest_reliable.plan import render as render_module
from pytest_reliable.plan.data import Dataset
from pytest_reliable.plan.render import render
from pytest_reliable.plan.sampling import derive_seed, make_plan
from pytest_reliable.space import Space
from pytest_reliable.tasks.builtin import MultipleChoice

N_RESAMPLINGS, N_INSTANCES = 100, 1000


def synthetic(n: int) -> Dataset:
    return Dataset.from_records([
        {"question": f"Which number is {i % 97} plus {i % 13}?",
         "choices": [str(i % 97 + i % 13 + d) for d in (0, 1, 2, 3)], "answer": 0}
        for i in range(n)
    ], name="synthetic")


def main() -> None:
    data = synthetic(N_INSTANCES)
    task = MultipleChoice()
    records = list(data)
    for mode in ("ilr", "fixed"):
        space = Space.default()
        render_module._FRAGMENTS.clear()
        start = time.perf_counter()
        plan = make_plan(space, data, N_RESAMPLINGS, mode=mode,
                         seed=derive_seed(0, "bench::test"))
        planned = time.perf_counter()
        n = 0
        for r in range(N_RESAMPLINGS):
            for i in range(N_INSTANCES):
                cell = plan.cell(r, i)
                render(space, cell.variant, records[i], task,
                       [records[j] for j in cell.demos])
                n += 1
        end = time.perf_counter()
        total = end - start
        print(f"{mode:5s}: plan {planned - start:.3f} s, render {end - planned:.3f} s, "
              f"total {total:.3f} s for {n:,} prompts = {1000 * total / n * 1000:.1f} ms per "
              f"1,000 prompts ({'OK' if total < 2 else 'SLOW'}: target < 2 s)")
        # Baseline: no fragment cache (cleared before each prompt), on a 10% slice, scaled.
        slice_r = N_RESAMPLINGS // 10
        start = time.perf_counter()
        for r in range(slice_r):
            for i in range(N_INSTANCES):
                cell = plan.cell(r, i)
                render_module._FRAGMENTS.clear()
                render(space, cell.variant, records[i], task, [records[j] for j in cell.demos])
        naive = (time.perf_counter() - start) * N_RESAMPLINGS / slice_r
        print(f"       naive rendering without the fragment cache: {naive:.3f} s "
              f"(estimated from {slice_r * N_INSTANCES:,} prompts); cached rendering is "
              f"{naive / (end - planned):.1f}x faster")


if __name__ == "__main__":
    main()
