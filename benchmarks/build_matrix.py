"""Build the shipped instance x format score matrix of the embedded model (issue 30 item 5).

The example's task, read the way the gate reads it: SmolLM2-135M-Instruct (the `local` extra,
llama.cpp) answers the 60 reviews of examples/data/reviews.jsonl under variants of the example's
pre-registered ``sentiment`` space (examples/reliable.yaml: 4 instructions x 2 x 2 x 2 x 2 format
values x 2 option orders = 128 variants), at temperature 0 with the gate's own sampling
parameters; prompts are rendered by the plugin (`plan.render.render`) and answers graded by the
example's task (`Classification(["positive", "negative"])`). A "format" here is one variant: the
format dimensions' values and the option order.

    python benchmarks/build_matrix.py                 # the shipped file: the first 48 formats
    python benchmarks/build_matrix.py --formats 128   # every variant of the space
    python benchmarks/build_matrix.py --check         # rebuild from the cache, compare, no call
    python benchmarks/build_matrix.py --probe 4       # 4 formats, print scores, write nothing

Every answer is kept in a gzipped JSON-lines cache beside the matrix (keyed by the model file's
hash, the messages and the sampling parameters), written as answers arrive, so an interrupted
build resumes where it stopped and a rebuild from the shipped cache makes no call (and does not
start the model). Variants are taken in a seeded random order, so ``--formats 48`` (the shipped
file) is a prefix of ``--formats 128``. What the shipped matrix shows: its ``.md``.

Writes benchmarks/data/matrix_smollm2_reviews.npz: ``scores`` (instances x formats, float in
[0, 1]), ``formats`` (each variant's dimension values and order, as JSON), ``instance_ids``
(the review's line number in reviews.jsonl, from 0), ``parsed`` (1 where the answer named a
label), ``answers``; and prints the figures the provenance file quotes.
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
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_reliable import Classification, Dataset
from pytest_reliable.models.base import SamplingParams
from pytest_reliable.plan.render import render
from pytest_reliable.space.config import load_spaces
from pytest_reliable.space.core import iter_variants

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
OUT = DATA / "matrix_smollm2_reviews.npz"
CACHE = DATA / "matrix_smollm2_reviews.answers.jsonl.gz"
WORKING = DATA / "matrix_smollm2_reviews.answers.jsonl"  # during a build; gzipped at its end
SEED = 20261128
PARAMS = SamplingParams(temperature=0.0, max_tokens=32)  # the gate's defaults at temperature 0


def variant_json(variant: Any) -> str:
    fields = dataclasses.asdict(variant)
    fields["order"] = list(variant.order) if variant.order is not None else None
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


def cache_key(model_hash: str, messages: Any) -> str:
    blob = json.dumps([model_hash, list(messages), PARAMS.as_dict()], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def read_cache() -> dict[str, str]:
    answers: dict[str, str] = {}
    for path, opener in ((CACHE, gzip.open), (WORKING, open)):
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


def write_cache(answers: dict[str, str]) -> None:
    with gzip.open(CACHE, "wt", encoding="utf-8") as fh:
        for key in sorted(answers):
            fh.write(json.dumps({"key": key, "text": answers[key]}) + "\n")
    WORKING.unlink(missing_ok=True)


def draw_variants(n_formats: int, *, canonical: bool = True) -> tuple[list[Any], Any]:
    """The first ``n_formats`` variants of the seeded draw, then (``canonical``) the space's
    canonical format, the example gate's canonical prompt, when the draw left it out: the draw
    of 48 missed the one format the model reads (0.82 against about 0.5 for the others)."""
    space = load_spaces(ROOT / "examples" / "reliable.yaml")["sentiment"]
    variants = list(iter_variants(space, n_options=2))
    order = np.random.default_rng(SEED).permutation(len(variants))
    drawn = [variants[k] for k in order[:n_formats]]
    first = dataclasses.replace(space.canonical_variant(), order=(0, 1))  # listed as such
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
    parser.add_argument("--formats", type=int, default=48,
                        help="formats of the seeded draw (the canonical format is added)")
    parser.add_argument("--check", action="store_true",
                        help="rebuild from the cache alone and compare with the shipped file "
                        "(exit 1 if a call would be needed or anything differs)")
    parser.add_argument("--probe", type=int, default=0,
                        help="score this many formats (of the same draw), print, write nothing")
    args = parser.parse_args(argv)
    from pytest_reliable.models.local import find_gguf, gguf_hash

    gguf = find_gguf()
    model_hash = gguf_hash(gguf)
    reviews = Dataset.from_file(ROOT / "examples" / "data" / "reviews.jsonl")
    task = Classification(labels=["positive", "negative"])
    if args.check:
        with np.load(OUT) as shipped:
            expected = {k: shipped[k] for k in shipped.files}
        n_formats = expected["scores"].shape[1] - 1  # the last column: the canonical format
    else:
        n_formats = args.probe or args.formats
    variants, space = draw_variants(n_formats)
    prompts = [[render(space, v, ex, task) for ex in reviews] for v in variants]
    answers = read_cache()
    todo: dict[str, Any] = {}
    for row in prompts:
        for prompt in row:
            key = cache_key(model_hash, prompt.messages)
            if key not in answers:
                todo.setdefault(key, prompt.messages)
    print(f"{len(variants)} formats x {len(reviews)} reviews: {len(todo)} calls to make",
          flush=True)
    if todo and args.check:
        print(f"--check: {len(todo)} answers are not in {CACHE.name}")
        return 1
    if todo:
        DATA.mkdir(parents=True, exist_ok=True)
        with open(WORKING, "a", encoding="utf-8") as fh:
            asyncio.run(ask_all(list(todo.items()), answers, fh))
        write_cache(answers)
    scores = np.zeros((len(reviews), len(variants)))
    parsed = np.zeros_like(scores)
    texts = np.empty(scores.shape, dtype=object)
    for f, row in enumerate(prompts):
        for i, prompt in enumerate(row):
            text = answers[cache_key(model_hash, prompt.messages)]
            grade = task.grade(text, reviews[i], prompt)
            scores[i, f], parsed[i, f], texts[i, f] = grade.score, float(grade.parsed), text
    per_format = scores.mean(axis=0)
    print(f"mean {scores.mean():.3f}; format scores min {per_format.min():.3f} "
          f"median {np.median(per_format):.3f} max {per_format.max():.3f} "
          f"sd {per_format.std(ddof=1) if len(variants) > 1 else 0.0:.3f}; "
          f"parsed {parsed.mean():.3f}")
    canonical = render(space, space.canonical_variant(), reviews[0], task)
    print("canonical variant in the draw:",
          any(v == space.canonical_variant() for v in variants), "-", canonical.user[:60])
    if args.probe:
        for f in np.argsort(per_format):
            print(f"  {per_format[f]:.3f}  {variants[f].describe()}")
        return 0
    arrays = {"scores": scores, "formats": np.array([variant_json(v) for v in variants]),
              "instance_ids": np.arange(len(reviews)), "parsed": parsed,
              "answers": np.array(texts.astype(str))}
    if args.check:
        differ = [k for k in arrays if not np.array_equal(arrays[k], expected.get(k))]
        print("--check:", f"{', '.join(differ)} differ" if differ else "identical, no call made")
        return 1 if differ else 0
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT.relative_to(ROOT)}; model {gguf.name} sha256 {model_hash}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
