"""The user's library: what ``tune`` measured on this user's GPUs, and the rule that merges it.

One JSON file in the per-user data folder (``default_path()``: ``$XDG_DATA_HOME/hgemm-bench/library.json``),
in ``search.library``'s format, entries of every GPU model the user tuned on. The ``library`` method
reads it in front of the packaged library (``search.library.load_entries``).

``merge(old, new, min_speedup)`` keeps one entry per (GPU model, shape, layout) and never lets a
worse measurement replace a better one: a ``kernel`` entry is replaced only by a kernel measured on
the same GPU model, shape and layout with a higher paired speedup; a ``baseline`` (labelled
fallback) entry only by a verified kernel that beat its paired baseline by ``min_speedup``. Entries
of other GPU models, shapes and layouts are left as they are.

A kernel entry that the new measurement ran again (``remeasured``: the same spec on the same GPU
model, shape and layout, paired with the baselines of its own calls) is judged by that fresh
speedup, not by the one it was recorded with: a recorded win is the best of many candidates and can
be noise. So a new kernel must beat the incumbent's fresh figure, and where the incumbent no longer
beats its baseline by ``min_speedup`` the new entry replaces it, the labelled fallback included
(measured on an H200: the packaged kernel for 64_64_16384, recorded at 1.02-1.04x, re-measured by
``tune`` below its baseline and then served at 0.955x of it, because the recorded figure stood).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from kernels_search import user_dirs

FILE = "library.json"


def default_path() -> Path:
    """``$XDG_DATA_HOME/hgemm-bench/library.json`` (``user_dirs.data_root``)."""
    return user_dirs.data_root() / FILE


def key(entry: dict) -> tuple[str, str, str]:
    """(GPU model, shape, layout): what one entry serves."""
    return (entry.get("gpu_name") or "", entry["shape"], entry["layout"])


def _speedup(entry: dict) -> float:
    sp = entry.get("paired_speedup")
    return float(sp) if sp is not None else float("-inf")


def better(new: dict, old: dict | None, min_speedup: float) -> bool:
    """Whether ``new`` may replace ``old`` (the module docstring's rule; same key assumed). ``old``
    carries ``remeasured: True`` when its speedup is the fresh one of the same measurement."""
    if old is None:
        return True
    if new.get("kind") != "kernel":
        return bool(old.get("kind") == "kernel" and old.get("remeasured") and _speedup(old) < min_speedup)
    if old.get("kind") == "kernel":
        return _speedup(new) > _speedup(old)
    return _speedup(new) >= min_speedup


@dataclass
class Decision:
    """What the merge did with one new entry: ``added``, ``replaced`` or ``kept`` (the old one stays)."""

    action: str
    new: dict
    old: dict | None

    def line(self) -> str:
        def what(e):
            if e is None:
                return "nothing"
            if e.get("kind") == "kernel":
                return f"{e['spec']} ({_speedup(e):.3f}x{', re-measured' if e.get('remeasured') else ''})"
            return f"the {e.get('spec')} fallback"
        gpu, shape, layout = key(self.new)
        return f"{shape} {layout} on {gpu}: {self.action} {what(self.new)}" + (
            f" (was {what(self.old)})" if self.action == "replaced" else
            f"; {what(self.old)} stays" if self.action == "kept" else "")


def merge(old: Sequence[dict], new: Iterable[dict], min_speedup: float,
          others: Sequence[dict] = (), remeasured: Mapping[tuple, float] | None = None,
          ) -> tuple[list[dict], list[Decision]]:
    """(the merged entries, one decision per new entry). ``others``: entries served behind ``old``
    (the packaged library): a new entry must beat those too, or a worse user entry would hide them.
    ``remeasured``: {(GPU model, shape, layout, spec): paired speedup} of the new measurement
    (``library.paired_speedups``); an incumbent kernel found there is judged by that figure."""
    by_key = {key(e): e for e in old}
    behind = {key(e): e for e in others}
    decisions = []
    for e in new:
        k = key(e)
        cur = by_key.get(k, behind.get(k))
        if cur is not None and cur.get("kind") == "kernel" and remeasured:
            fresh = remeasured.get(k + (cur["spec"],))
            if fresh is not None:
                cur = dict(cur, paired_speedup=fresh, remeasured=True)
        if better(e, cur, min_speedup):
            by_key[k] = e
            decisions.append(Decision("replaced" if cur is not None else "added", e, cur))
        else:
            decisions.append(Decision("kept", e, cur))
    merged = sorted(by_key.values(), key=lambda e: (e.get("gpu_name") or "", e["m"], e["n"], e["k"], e["layout"]))
    return merged, decisions


def read(path: Path) -> list[dict]:
    """The entries of a library file ([] where there is none)."""
    path = Path(path)
    if not path.exists():
        return []
    return list(json.loads(path.read_text()).get("entries", []))


def write(path: Path, entries: Sequence[dict], version: int, min_speedup: float) -> Path:
    """Write ``entries`` to ``path`` atomically (temp file + rename); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": version, "min_speedup": min_speedup, "entries": list(entries)}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    return path
