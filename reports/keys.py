"""Short method keys: how plots name a method without repeating its full spec on every mark.

A family config's canonical name lists every knob (``hopper:tile_m=128,tile_n=128,...``, up to
~190 characters). Written into the tooltip of each of the thousands of marks, those names made
the page most of its size and the legends unreadable. Plots therefore name a long method by a
key (``hopper#3fa2``); the full spec is written once per method where a reader looks it up: the
leaderboard row, the per-shape table, the legend entry's and the chart's own hover text.

A key is the family (the name before ``:``) and a few hex digits of the name's SHA-1, so it
does not depend on which other methods a site holds: the same config has the same key in every
rebuild and every run, and a key quoted in notes keeps pointing at the same config. Short names
(``cublaslt-autotune``) are their own key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

KEEP_MAX = 24  # names up to this length are short enough to print on every mark as they are
DIGITS = 4  # hex digits of the hash; more are used only where two names of a site collide


def _key(name: str, digits: int) -> str:
    family = name.split(":", 1)[0][:16] or "method"
    return f"{family}#{hashlib.sha1(name.encode()).hexdigest()[:digits]}"


def method_keys(methods: Iterable[str]) -> dict[str, str]:
    """A unique short key for every method name (a short name is its own key)."""
    names = sorted(set(methods))
    short = {n for n in names if len(n) <= KEEP_MAX}
    long_ = [n for n in names if n not in short]
    for digits in range(DIGITS, 41):
        keys = {n: _key(n, digits) for n in long_}
        if len(set(keys.values())) == len(keys) and not short & set(keys.values()):
            break
    return {**{n: n for n in short}, **keys}
