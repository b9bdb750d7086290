"""What a call costs in US dollars (SPEC section 13): usage in, price table, USD out.

The price table is a YAML file (``--reliable-pricing``)::

    models:
      gpt-4o-mini: {input: 0.15, output: 0.60, cached_input: 0.075, batch: 0.5}
      "claude-*": {input: 3.0, output: 15.0}

USD per million tokens (finite, >= 0 and at most `MAX_PRICE`); ``batch`` multiplies the price of
a call sent through a provider's batch API (at most 1: a discount). ``cached_input`` (prompt
tokens the provider served from its prompt cache) defaults to ``input``, ``batch`` to 1. A model
is priced by the first entry that names it exactly, else by the first glob (in file order) that
matches its name or its identity.

Spend is computed from the usage the API returned (prompt, completion and cached prompt tokens).
A model that returns no usage (a user callable) has its tokens estimated at `CHARS_PER_TOKEN`
characters per token, and the spend is marked ``estimated``.

What costs nothing, and what is not known: the embedded model and a user's callable without a
price cost nothing by definition (SPEC section 13: `FREE`); a model the plugin calls over an API
(the OpenAI-compatible adapter) that the table does not price has a cost nobody knows
(`unpriced`): its calls count no dollars, and the `Spend` says so (``usd`` null, ``priced``
false, the model in ``unpriced_models``) instead of reading as zero.
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
MAX_PRICE = 10_000.0
"""The dearest price accepted, in USD per million tokens (a hundred times today's dearest
models): a larger number is a typo or an overflow (``1e308`` turns a ledger's sums into inf and
NaN, and a NaN budget never refuses a call)."""
MAX_BATCH = 1.0
"""The batch API is a discount on the direct price: a multiplier above 1 is a typo."""


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
    unknown_for: str | None = None
    """Set on the price of a model nobody priced (`unpriced`): that model's identity. Its calls
    count no dollars and make the spend unknown."""

    @property
    def free(self) -> bool:
        return self.input == 0 and self.output == 0 and self.cached_input == 0

    @property
    def known(self) -> bool:
        return self.unknown_for is None

    def usd(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0,
            *, batch: bool = False) -> float:
        cached = min(max(0, cached_prompt_tokens), prompt_tokens)
        usd = ((prompt_tokens - cached) * self.input + cached * self.cached_input
               + completion_tokens * self.output) / PER_MILLION
        return usd * self.batch if batch else usd


FREE = Price(0.0, 0.0, 0.0, pattern="(free)")
"""The embedded model and unpriced user callables: free by definition (SPEC section 13)."""


def unpriced(identity: str) -> Price:
    """The price of an API model the table does not price: not zero, unknown."""
    return Price(0.0, 0.0, 0.0, pattern="(no price)", unknown_for=identity)


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` where no tokenizer is at hand: `CHARS_PER_TOKEN` characters each."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_text(messages: Iterable[tuple[str, str]]) -> str:
    return "\n\n".join(content for _, content in messages)


@dataclass
class Spend:
    """Money of some calls: ``usd`` paid now, the tokens paid for, ``cached_usd_saved`` (what the
    answers served from the cache cost when they were paid), ``estimated`` (some tokens were
    estimated, not reported by the API). Its `entry` is the JSON report's ``cost``.

    ``unpriced_paid`` / ``unpriced_cached``: the models without a price (`unpriced`) whose calls
    were paid now / served from the cache: then ``usd`` / ``cached_usd_saved`` is unknown."""

    usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_usd_saved: float = 0.0
    estimated: bool = False
    unpriced_paid: set[str] = field(default_factory=set)
    unpriced_cached: set[str] = field(default_factory=set)

    def add(self, other: Spend) -> None:
        self.usd += other.usd
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_usd_saved += other.cached_usd_saved
        self.estimated = self.estimated or other.estimated
        self.unpriced_paid |= other.unpriced_paid
        self.unpriced_cached |= other.unpriced_cached

    def pay(self, cost: CallCost) -> None:
        """One call made now."""
        self.usd += cost.usd
        self.prompt_tokens += cost.prompt_tokens
        self.completion_tokens += cost.completion_tokens
        self.estimated = self.estimated or cost.estimated
        if cost.unpriced is not None:
            self.unpriced_paid.add(cost.unpriced)

    def save(self, cost: CallCost) -> None:
        """One answer served from the cache: what it cost when it was paid is saved now."""
        self.cached_usd_saved += cost.usd
        self.estimated = self.estimated or cost.estimated
        if cost.unpriced is not None:
            self.unpriced_cached.add(cost.unpriced)

    @property
    def priced(self) -> bool:
        """Every call counted here had a known price (or was free by definition)."""
        return not (self.unpriced_paid or self.unpriced_cached)

    @classmethod
    def total(cls, spends: Iterable[Spend]) -> Spend:
        out = cls()
        for spend in spends:
            out.add(spend)
        return out

    def entry(self) -> dict[str, Any]:
        """The JSON ``cost``: SPEC 13's fields, ``usd`` (``cached_usd_saved``) null when a
        model without a price was paid (served), ``priced`` and ``unpriced_models`` saying
        which."""
        return {"usd": None if self.unpriced_paid else round(self.usd, 6),
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cached_usd_saved": (None if self.unpriced_cached
                                     else round(self.cached_usd_saved, 6)),
                "estimated": self.estimated, "priced": self.priced,
                "unpriced_models": sorted(self.unpriced_paid | self.unpriced_cached)}


@dataclass(frozen=True)
class CallCost:
    """One answer's tokens and price (its usage, or an estimate when it reports none)."""

    usd: float
    prompt_tokens: int
    completion_tokens: int
    estimated: bool
    unpriced: str | None = None
    """The model's identity when it has no price (``usd`` is then 0 but unknown)."""


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
                    estimated, price.unknown_for)


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
        except ValueError as error:  # e.g. an integer past Python's limit of digits
            raise PricingError(f"{where} cannot be read ({str(error).split(';')[0]}); prices "
                               "are USD per million tokens, e.g. 0.15") from None
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
        values[key] = _checked(f"{field_of}.{key}", key, entry[key])
    return Price(values["input"], values["output"], values.get("cached_input", values["input"]),
                 values.get("batch", 1.0), name)


def _checked(where: str, key: str, value: Any) -> float:
    """A price field's value: a finite number in [0, `MAX_PRICE`] (a batch multiplier in
    [0, `MAX_BATCH`]). Huge integers are refused before any conversion can overflow."""
    batch = key == "batch"
    what = ("a multiplier of the direct price, e.g. 0.5" if batch
            else "USD per million tokens, e.g. 0.15")
    cap = MAX_BATCH if batch else MAX_PRICE
    shown = _shown(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        hint = ""
        if isinstance(value, str) and _reads_as_number(value):
            hint = ("; YAML read it as text (quoted, or an exponent without a sign or a dot: "
                    "write 1.0e-06, not 1e-6)")
        raise PricingError(f"{where} is {shown}: give a number >= 0 ({what}){hint}")
    if isinstance(value, float) and not math.isfinite(value):
        raise PricingError(f"{where} is {shown}: give a finite number >= 0 ({what})")
    if value < 0:
        raise PricingError(f"{where} is {shown}: give a number >= 0 ({what})")
    if value > cap:
        why = ("above 1, but the batch API is a discount on the direct price" if batch else
               f"above ${cap:,.0f} per million tokens, which no model costs")
        raise PricingError(f"{where} is {shown}: {why}; give {what}"
                           + ("" if batch else " (the price per token times 1,000,000)"))
    return float(value)


def _reads_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _shown(value: Any) -> str:
    """A field's value for a message: a 400-digit number by its length, not its digits."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "a number of thousands of digits"
    return text if len(text) <= 40 else f"{text[:12]}... (a number of {len(text)} digits)" \
        if isinstance(value, int) else f"{text[:37]}..."


def model_names(model: Any) -> list[str]:
    """The names a price table may know a model by: its API name, then its identity (and those
    of a model it wraps: a judge's ``id=`` over ``openai_model(NAME)`` is priced as NAME too)."""
    names: list[str] = []
    for layer in _layers(model):
        api_name = getattr(layer, "model", None)
        if isinstance(api_name, str) and api_name not in names:
            names.append(api_name)
    for layer in _layers(model):
        identity = str(getattr(layer, "identity", ""))
        if identity not in names:
            names.append(identity)
    return names


def _layers(model: Any) -> list[Any]:
    """``model`` and the models it wraps (a user's object under another identity)."""
    layers = [model]
    while getattr(layers[-1], "inner", None) is not None and len(layers) < 8:
        layers.append(layers[-1].inner)
    return layers


def is_embedded(model: Any) -> bool:
    return str(getattr(model, "identity", "")).startswith("local:")


def calls_an_api(model: Any) -> bool:
    """Whether the plugin calls ``model`` over a provider's API (the OpenAI-compatible adapter,
    however wrapped): its calls cost money even when no price is known. A user's callable or
    model object is the user's code: without a price it costs nothing (SPEC section 13)."""
    from pytest_reliable.models.openai_compat import OpenAICompatibleModel

    return not is_embedded(model) and any(isinstance(layer, OpenAICompatibleModel)
                                           for layer in _layers(model))


__all__ = [
    "CHARS_PER_TOKEN",
    "FREE",
    "MAX_BATCH",
    "MAX_PRICE",
    "CallCost",
    "Price",
    "PriceTable",
    "PricingError",
    "Spend",
    "call_cost",
    "calls_an_api",
    "estimate_tokens",
    "is_embedded",
    "max_call_usd",
    "model_names",
    "unpriced",
]
