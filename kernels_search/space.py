"""Enumerate a family's valid configurations (what a search walks over).

``configs(family)`` yields every knob combination that passes the family's validity rules;
``compile_configs(family)`` only the distinct compile-time ones (one build each), since runtime
knobs share a binary. Spaces are a few hundred to a few thousand points, so plain enumeration is
fine.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Iterator

from kernels_search.family import Family


def configs(family: Family, *, runtime: bool = True) -> Iterator[dict[str, Any]]:
    """Every valid knob dict; with runtime=False runtime knobs stay at their defaults."""
    names = [k.name for k in family.knobs]
    axes = [k.values if (runtime or not k.runtime) else (k.default,) for k in family.knobs]
    for combo in itertools.product(*axes):
        knobs = dict(zip(names, combo))
        if family.is_valid(knobs):
            yield knobs


def compile_configs(family: Family) -> list[dict[str, Any]]:
    """Distinct compile-time configs (runtime knobs at defaults): one build each."""
    return list(configs(family, runtime=False))


def sample(family: Family, n: int, seed: int = 0, *, runtime: bool = True) -> list[dict[str, Any]]:
    """``n`` distinct valid configs drawn uniformly (all of them when fewer exist)."""
    pool = list(configs(family, runtime=runtime))
    random.Random(seed).shuffle(pool)
    return pool[:n]
