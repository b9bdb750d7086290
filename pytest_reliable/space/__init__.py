"""The pre-registered perturbation space: dimensions, values, validity rules, hash, YAML, lock.

A `Space` lists, per dimension, the values a prompt format may take (SPEC section 3). A `Variant`
is one value per dimension plus an option-order permutation. Validity rules (after FormatSpread):

- R1: if ``field_spacing`` has no newline, neither ``option_separator`` nor ``field_marker`` nor
  ``answer_sentinel`` may contain one.
- R2: an enumerator must have a label for every option: ``unicode_roman`` only up to 12 options
  (also ``greek`` up to 24 and ``keyboard`` up to 10; letters and numbers have no limit).
- R3: variants that render identically count once: a casing that turns the marker and the
  sentinel into the same strings as an earlier casing of the list is not a variant of its own
  (e.g. every casing when both are empty). The first casing of such a group represents it.

An invalid variant is never produced by sampling. This package never renders prompts.

Modules, each importing only those before it: `labels` (enumerators and casing), `dimensions`
(dimension names, defaults, limits), `variant` (`Variant` and the rules one variant obeys),
`declaration` (what a space declares, validated from a mapping, with errors naming file, key
path, line and fix), `core` (`Space`, built from a declaration: hash and format tables), `config`
(reliable.yaml) and `lock` (reliable.lock).
"""

from pytest_reliable.space.config import load_spaces, lookalike, parse_spaces
from pytest_reliable.space.core import Space, iter_variants
from pytest_reliable.space.declaration import FewShot
from pytest_reliable.space.dimensions import (
    FORMAT_DIMENSIONS,
    LIST_LIMIT,
    PERMUTE_LISTED_MAX,
    VALUE_DIMENSIONS,
)
from pytest_reliable.space.labels import enumerator_labels
from pytest_reliable.space.lock import (
    LockDifference,
    compare_lock,
    lock_update_summary,
    read_lock,
    write_lock,
)
from pytest_reliable.space.variant import Variant

__all__ = [
    "FORMAT_DIMENSIONS",
    "LIST_LIMIT",
    "PERMUTE_LISTED_MAX",
    "VALUE_DIMENSIONS",
    "FewShot",
    "LockDifference",
    "Space",
    "Variant",
    "compare_lock",
    "enumerator_labels",
    "iter_variants",
    "load_spaces",
    "lock_update_summary",
    "lookalike",
    "parse_spaces",
    "read_lock",
    "write_lock",
]
