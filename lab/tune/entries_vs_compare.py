"""The tune's library entries against the compare that followed: did each recorded win hold?

For every entry of a user library (what ``tune`` wrote) on a shape and layout the compare measured: the entry's
recorded paired speedup, the compare's (the fastest baseline of that layout over the ``library`` row) and, over the
kernel entries, the geomean of compare over recorded. The check registered in lab/NOTEBOOK.md (2026-12-05, seventh)
for ``tune --confirm``.

    python -m lab.tune.entries_vs_compare USER_LIBRARY.json COMPARE.parquet [--shapes FILE]
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from harness.shapes import parse_shapes
from harness.timing.stats import geomean


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library")
    ap.add_argument("parquet")
    ap.add_argument("--shapes", help="a shape file: only its shapes' entries")
    a = ap.parse_args(argv)
    keep = {s.name for s in parse_shapes(a.shapes)} if a.shapes else None
    doc = json.load(open(a.library))
    entries = doc["entries"] if isinstance(doc, dict) else doc
    df = pd.read_parquet(a.parquet)
    df = df[df["status"] == "ok"]
    ratios = []
    for e in entries:
        if keep is not None and e["shape"] not in keep:
            continue
        g = df[(df["shape"] == e["shape"]) & (df["layout"] == e["layout"])]
        lib = g[g["method"] == "library"]["device_us_median"]
        if lib.empty:
            continue
        now = g[g["is_baseline"]]["device_us_median"].min() / lib.min()
        if e["kind"] == "kernel":
            ratios.append(now / e["paired_speedup"])
        print(f"{e['shape']:>16} {e['layout']} {e['kind']:8} pairs {e.get('paired_runs', '-')}  "
              f"tune {e['paired_speedup']:.3f}x  compare {now:.3f}x  {e['spec'][:60]}")
    if ratios:
        print(f"{len(ratios)} kernel entries: compare over tune {geomean(ratios):.4f}x geomean, min {min(ratios):.3f}x")


if __name__ == "__main__":
    main()
