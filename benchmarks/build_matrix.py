"""Build the shipped instance x format score matrices of the embedded model (issue 30 item 5).

Each matrix is one row of `SOURCES`: a dataset, a pre-registered space and the task that grades
it, read the way the gate reads them. SmolLM2-135M-Instruct (the `local` extra, llama.cpp)
answers every instance under variants ("formats") of the space, at temperature 0 with the gate's
own sampling parameters; prompts are rendered by the plugin (`plan.render.render`) and answers
graded by the task's own ``grade``. A "format" is one variant: the format dimensions' values and
the option order.

- ``reviews``: the example gate's 60 reviews under its ``sentiment`` space (examples/reliable.yaml,
  128 variants; the file holds 48 of a seeded draw and the canonical format). The model is at
  chance there, except at the canonical prompt.
- ``capitals``: 60 "What is the capital of X?" questions (benchmarks/data/capitals.jsonl, written
  for this project) under the 68 valid formats of benchmarks/data/capitals.yaml, graded by
  `Generation(grader="regex")`. A task the model knows in part, where formats move its score.

    python benchmarks/build_matrix.py                         # the reviews matrix
    python benchmarks/build_matrix.py --matrix capitals       # the capitals matrix
    python benchmarks/build_matrix.py --formats 128           # more formats of the same draw
    python benchmarks/build_matrix.py --check [--matrix M]    # rebuild from the cache, compare
    python benchmarks/build_matrix.py --probe 4               # 4 formats, print, write nothing

Every answer is kept in a gzipped JSON-lines cache beside the matrix (keyed by the model file's
hash, the messages and the sampling parameters), written as answers arrive, so an interrupted
build resumes where it stopped and a rebuild from the shipped cache makes no call (and does not
start the model). Variants are taken in a seeded random order, so ``--formats 48`` is a prefix
of ``--formats 128``. What each shipped matrix shows: its ``.md``.

Writes benchmarks/data/matrix_smollm2_<name>.npz: ``scores`` (instances x formats, float in
[0, 1]), ``formats`` (each variant's dimension values and order, as JSON), ``instance_ids``
(the instance's line number in its data file, from 0), ``parsed`` (1 where the answer could be
graded), ``answers``; and prints the figures the provenance file quotes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gzip
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_reliable import Classification, Dataset, Generation
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.plan.render import render
from pytest_reliable.space.config import load_spaces
from pytest_reliable.space.core import iter_variants

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
SEED = 20261128
PARAMS = SamplingParams(temperature=0.0, max_tokens=32)  # the gate's defaults at temperature 0


@dataclasses.dataclass(frozen=True)
class MatrixSource:
    """One shipped matrix: where its instances, space and grading come from."""

    name: str
    dataset: Path
    spaces_file: Path
    space: str
    task: Callable[[], Any]
    n_options: int
    formats: int
    """How many formats of the seeded draw the shipped file holds (the canonical one is added)."""

    @property
    def out(self) -> Path:
        return DATA / f"matrix_smollm2_{self.name}.npz"

    @property
    def cache(self) -> Path:
        return DATA / f"matrix_smollm2_{self.name}.answers.jsonl.gz"

    @property
    def working(self) -> Path:  # during a build; gzipped at its end
        return DATA / f"matrix_smollm2_{self.name}.answers.jsonl"


SOURCES = {source.name: source for source in (
    MatrixSource("reviews", ROOT / "examples" / "data" / "reviews.jsonl",
                 ROOT / "examples" / "reliable.yaml", "sentiment",
                 lambda: Classification(labels=["positive", "negative"]), 2, 48),
    MatrixSource("capitals", DATA / "capitals.jsonl", DATA / "capitals.yaml", "capitals",
                 lambda: Generation(grader="regex"), 0, 68),
)}


def variant_json(variant: Any) -> str:
    fields = dataclasses.asdict(variant)
    fields["order"] = list(variant.order) if variant.order is not None else None
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


def cache_key(model_hash: str, messages: Any) -> str:
    blob = json.dumps([model_hash, list(messages), PARAMS.as_dict()], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def read_cache(source: MatrixSource) -> dict[str, str]:
    answers: dict[str, str] = {}
    for path, opener in ((source.cache, gzip.open), (source.working, open)):
        if not path.exists():
            continue
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill: asked again
                    continue
                answers[row["key"]] = row["text"]
    return answers


def write_cache(source: MatrixSource, answers: dict[str, str]) -> None:
    with gzip.open(source.cache, "wt", encoding="utf-8") as fh:
        for key in sorted(answers):
            fh.write(json.dumps({"key": key, "text": answers[key]}) + "\n")
    source.working.unlink(missing_ok=True)


def draw_variants(source: MatrixSource, n_formats: int, *,
                  canonical: bool = True) -> tuple[list[Any], Any]:
    """The first ``n_formats`` variants of the seeded draw, then (``canonical``) the space's
    canonical format, when the draw left it out: the reviews draw of 48 missed the one format
    the model reads there (0.82 against about 0.5 for the others)."""
    space = load_spaces(source.spaces_file)[source.space]
    variants = list(iter_variants(space, n_options=source.n_options))
    order = np.random.default_rng(SEED).permutation(len(variants))
    drawn = [variants[k] for k in order[:n_formats]]
    first = space.canonical_variant()
    if source.n_options:  # listed with its order, which renders as the canonical prompt
        first = dataclasses.replace(first, order=tuple(range(source.n_options)))
    if canonical and first not in drawn:
        drawn.append(first)
    return drawn, space


async def ask_all(todo: list[tuple[str, Any]], answers: dict[str, str], fh: IO[str]) -> None:
    """Ask the embedded model one call at a time (as the example gate does), keeping each answer
    in ``fh`` as it arrives: a killed build resumes where it stopped."""
    from pytest_reliable.models.local import LocalModelServer

    with LocalModelServer() as server:
        model = server.model()
        t0 = time.monotonic()
        for done, (key, messages) in enumerate(todo, 1):
            response = await model.acomplete([dict(m) for m in messages], PARAMS)
            answers[key] = response.text
            fh.write(json.dumps({"key": key, "text": response.text}) + "\n")
            fh.flush()
            if done % 60 == 0:
                rate = (time.monotonic() - t0) / done
                print(f"{done}/{len(todo)} calls, {rate:.2f} s/call", flush=True)
        await model.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matrix", choices=sorted(SOURCES), default="reviews",
                        help="which matrix to build or check (default: reviews)")
    parser.add_argument("--formats", type=int, default=None,
                        help="formats of the seeded draw (the canonical format is added; "
                        "default: the shipped file's)")
    parser.add_argument("--check", action="store_true",
                        help="rebuild from the cache alone and compare with the shipped file "
                        "(exit 1 if a call would be needed or anything differs)")
    parser.add_argument("--probe", type=int, default=0,
                        help="score this many formats (of the same draw), print, write nothing")
    args = parser.parse_args(argv)
    from pytest_reliable.models.local import find_gguf, gguf_hash

    gguf = find_gguf()
    model_hash = gguf_hash(gguf)
    source = SOURCES[args.matrix]
    instances = Dataset.from_file(source.dataset)
    task = source.task()
    n_formats = args.probe or args.formats or source.formats
    if args.check:
        with np.load(source.out) as shipped:
            expected = {k: shipped[k] for k in shipped.files}
    variants, space = draw_variants(source, n_formats)
    prompts = [[render(space, v, ex, task) for ex in instances] for v in variants]
    answers = read_cache(source)
    todo: dict[str, Any] = {}
    for row in prompts:
        for prompt in row:
            key = cache_key(model_hash, prompt.messages)
            if key not in answers:
                todo.setdefault(key, prompt.messages)
    print(f"{len(variants)} formats x {len(instances)} instances: {len(todo)} calls to make",
          flush=True)
    if todo and args.check:
        print(f"--check: {len(todo)} answers are not in {source.cache.name}")
        return 1
    if todo:
        DATA.mkdir(parents=True, exist_ok=True)
        with open(source.working, "a", encoding="utf-8") as fh:
            asyncio.run(ask_all(list(todo.items()), answers, fh))
        write_cache(source, answers)
    scores = np.zeros((len(instances), len(variants)))
    parsed = np.zeros_like(scores)
    texts = np.empty(scores.shape, dtype=object)
    for f, row in enumerate(prompts):
        for i, prompt in enumerate(row):
            text = answers[cache_key(model_hash, prompt.messages)]
            grade = task.grade(text, instances[i], prompt)
            scores[i, f], parsed[i, f], texts[i, f] = grade.score, float(grade.parsed), text
    per_format = scores.mean(axis=0)
    print(f"mean {scores.mean():.3f}; format scores min {per_format.min():.3f} "
          f"median {np.median(per_format):.3f} max {per_format.max():.3f} "
          f"sd {per_format.std(ddof=1) if len(variants) > 1 else 0.0:.3f}; "
          f"parsed {parsed.mean():.3f}")
    canonical = render(space, space.canonical_variant(), instances[0], task)
    print("canonical variant in the draw:",
          any(v == space.canonical_variant() for v in variants), "-", canonical.user[:60])
    if args.probe:
        for f in np.argsort(per_format):
            print(f"  {per_format[f]:.3f}  {variants[f].describe()}")
        return 0
    arrays = {"scores": scores, "formats": np.array([variant_json(v) for v in variants]),
              "instance_ids": np.arange(len(instances)), "parsed": parsed,
              "answers": np.array(texts.astype(str))}
    if args.check:
        differ = [k for k in arrays if not np.array_equal(arrays[k], expected.get(k))]
        print("--check:", f"{', '.join(differ)} differ" if differ else "identical, no call made")
        return 1 if differ else 0
    np.savez_compressed(source.out, **arrays)
    print(f"wrote {source.out.relative_to(ROOT)}; model {gguf.name} sha256 {model_hash}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
