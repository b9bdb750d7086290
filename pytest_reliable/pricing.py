"""What a call costs in US dollars (SPEC section 13): usage in, price table, USD out.

The price table is a YAML file (``--reliable-pricing``)::

    models:
      gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075, batch: 0.5}
      "claude-*": {input: 3.0, output: 15.0}

USD per million tokens; ``batch`` multiplies the price of a call sent through a provider's batch
API. ``cached_input`` (prompt tokens the provider served from its prompt cache) defaults to
``input``, ``batch`` to 1. A model is priced by the first entry that names it exactly, else by the
first glob (in file order) that matches its name or its identity.

Spend is computed from the usage the API returned (prompt, completion and cached prompt tokens).
A model that returns no usage (a user callable) has its tokens estimated at `CHARS_PER_TOKEN`
characters per token, and the spend is marked ``estimated``. The embedded model costs nothing.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_reliable.errors import ReliableError
from pytest_reliable.models.base import ModelResponse

CHARS_PER_TOKEN = 4
"""Token estimate where a model reports no usage: OpenAI's rule of thumb for English text."""
PER_MILLION = 1_000_000
CACHED_PROMPT_TOKENS = "cached_prompt_tokens"
"""`ModelResponse.extra` key: prompt tokens the provider served from its prompt cache."""
BATCH = "batch"
"""`ModelResponse.extra` key: the answer came through the batch API (priced with ``batch``)."""
FIELDS = ("input", "output", "cached_input", "batch")


class PricingError(ReliableError):
    """The price table cannot be used: the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one model (``batch``: multiplier for the batch API)."""

    input: float
    output: float
    cached_input: float
    batch: float = 1.0
    pattern: str = ""
    """The table's entry that priced the model (for messages)."""

    @property
    def free(self) -> bool:
        return self.input == 0 and self.output == 0 and self.cached_input == 0

    def usd(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0,
            *, batch: bool = False) -> float:
        cached = min(max(0, cached_prompt_tokens), prompt_tokens)
        usd = ((prompt_tokens - cached) * self.input + cached * self.cached_input
               + completion_tokens * self.output) / PER_MILLION
        return usd * self.batch if batch else usd


FREE = Price(0.0, 0.0, 0.0, pattern="(free)")
"""The embedded model and unpriced user callables."""


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` where no tokenizer is at hand: `CHARS_PER_TOKEN` characters each."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_text(messages: Iterable[tuple[str, str]]) -> str:
    return "\n\n".join(content for _, content in messages)


@dataclass
class Spend:
    """Money of some calls: ``usd`` paid now, the tokens paid for, ``cached_usd_saved`` (what the
    answers served from the cache cost when they were paid), ``estimated`` (some tokens were
    estimated, not reported by the API). Its `entry` is the JSON report's ``cost``."""

    usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_usd_saved: float = 0.0
    estimated: bool = False

    def add(self, other: Spend) -> None:
        self.usd += other.usd
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_usd_saved += other.cached_usd_saved
        self.estimated = self.estimated or other.estimated

    @classmethod
    def total(cls, spends: Iterable[Spend]) -> Spend:
        out = cls()
        for spend in spends:
            out.add(spend)
        return out

    def entry(self) -> dict[str, Any]:
        return {"usd": round(self.usd, 6), "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cached_usd_saved": round(self.cached_usd_saved, 6), "estimated": self.estimated}


@dataclass(frozen=True)
class CallCost:
    """One answer's tokens and price (its usage, or an estimate when it reports none)."""

    usd: float
    prompt_tokens: int
    completion_tokens: int
    estimated: bool


def call_cost(price: Price, messages: Sequence[tuple[str, str]],
              response: ModelResponse) -> CallCost:
    estimated = response.prompt_tokens is None or response.completion_tokens is None
    prompt = (response.prompt_tokens if response.prompt_tokens is not None
              else estimate_tokens(prompt_text(messages)))
    completion = (response.completion_tokens if response.completion_tokens is not None
                  else estimate_tokens(response.text))
    cached = int(response.extra.get(CACHED_PROMPT_TOKENS) or 0) if response.extra else 0
    batch = bool(response.extra.get(BATCH)) if response.extra else False
    return CallCost(price.usd(prompt, completion, cached, batch=batch), prompt, completion,
                    estimated)


def max_call_usd(price: Price, messages: Sequence[tuple[str, str]], max_tokens: int, *,
                 batch: bool = False) -> float:
    """The most one call may cost, reserved from a USD budget before it is sent: its prompt
    tokens (estimated) at the input price plus ``max_tokens`` at the output price."""
    return price.usd(estimate_tokens(prompt_text(messages)), max_tokens, batch=batch)


@dataclass(frozen=True)
class PriceTable:
    path: Path
    prices: dict[str, Price] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> PriceTable:
        """Read and check the file; `PricingError` naming the file and the field otherwise."""
        import yaml

        where = f"pricing file {path}"
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PricingError(f"{where} does not exist: give --reliable-pricing the path of a "
                               "YAML file {models: {NAME: {input: ..., output: ...}}}") from None
        except (OSError, UnicodeDecodeError) as error:
            raise PricingError(f"{where} cannot be read ({error})") from None
        except yaml.YAMLError as error:
            raise PricingError(f"{where} is not valid YAML ({' '.join(str(error).split())})"
                               ) from None
        if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
            raise PricingError(f"{where}: needs a top-level 'models' mapping, e.g. models: "
                               "{gpt-4o-mini: {input: 0.15, output: 0.60}} (USD per million "
                               "tokens)")
        unknown = sorted(set(map(str, data)) - {"models"})
        if unknown:
            raise PricingError(f"{where}: unknown top-level field {unknown[0]!r}: only 'models'")
        prices = {}
        for name, entry in data["models"].items():
            prices[str(name)] = _price(where, str(name), entry)
        return cls(path, prices)

    def price_for(self, names: Sequence[str]) -> Price | None:
        """The price of a model known by ``names`` (its name, then its identity): an exact entry
        first, else the first glob matching one of them."""
        for name in names:
            if name in self.prices:
                return self.prices[name]
        for pattern, price in self.prices.items():
            if any(fnmatch.fnmatchcase(name, pattern) for name in names):
                return price
        return None


def _price(where: str, name: str, entry: Any) -> Price:
    field_of = f"{where}: models.{name}"
    if not isinstance(entry, dict):
        raise PricingError(f"{field_of} must be a mapping {{input: USD, output: USD}} (USD per "
                           "million tokens)")
    unknown = sorted(set(map(str, entry)) - set(FIELDS))
    if unknown:
        raise PricingError(f"{field_of}.{unknown[0]} is not a price field: use "
                           f"{', '.join(FIELDS)}")
    values: dict[str, float] = {}
    for key in FIELDS:
        if key not in entry:
            if key in ("input", "output"):
                raise PricingError(f"{field_of}.{key} is missing: give USD per million tokens")
            continue
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise PricingError(f"{field_of}.{key} is {value!r}: give a number >= 0"
                               + (" (a multiplier, e.g. 0.5)" if key == "batch" else
                                  " (USD per million tokens)"))
        values[key] = float(value)
    return Price(values["input"], values["output"], values.get("cached_input", values["input"]),
                 values.get("batch", 1.0), name)


def model_names(model: Any) -> list[str]:
    """The names a price table may know a model by: its API name, then its identity."""
    names = []
    api_name = getattr(model, "model", None)
    if isinstance(api_name, str):
        names.append(api_name)
    names.append(str(getattr(model, "identity", "")))
    return names


def is_embedded(model: Any) -> bool:
    return str(getattr(model, "identity", "")).startswith("local:")


__all__ = [
    "CHARS_PER_TOKEN",
    "FREE",
    "CallCost",
    "Price",
    "PriceTable",
    "PricingError",
    "Spend",
    "call_cost",
    "estimate_tokens",
    "is_embedded",
    "max_call_usd",
    "model_names",
]
