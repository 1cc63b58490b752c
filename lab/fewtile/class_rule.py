"""An automatic choice of kernel per few-tile shape, fitted on a study run, for issue 33's class samples.

The issue asks for the kernel "chosen per shape by an automatic procedure (the search, the library or a rule; no
per-shape hand choice)". This is the rule: shapes fall into buckets by K (< 2048 or not) and by how many 64 x 64
output tiles they have (<= 16, <= 64, <= 256, more); in each bucket the study's configs are ranked by their geomean
speedup over the best baseline on the bucket's study shapes, and the bucket takes the best of them if it beats the
library there, else the library. A class shape in a bucket the study never saw gets the library.
Leave-one-out on the study says how well the rule does on a shape it was not fitted on.

    python3 -m lab.fewtile.class_rule STUDY.parquet [STUDY2.parquet ...] --shapes lab/fewtile/deepk-60-seed3301.txt
        --shapes lab/fewtile/shallowk-60-seed3301.txt --chosen OUT.tsv --plan OUT-plan.txt

OUT.tsv (shape<TAB>method) scores a later run (`lab/skinny/table.py RUN --chosen OUT.tsv`); OUT-plan.txt measures
each class shape's choice beside the library (`compare --plan`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict

import pandas as pd

from harness.shapes import parse_shape, parse_shapes
from harness.timing.stats import geomean
from lab.skinny.table import load_rows, speedup_table

LIBRARY = "library"
TILE_EDGES = (16, 64, 256)


def bucket(shape: str) -> tuple[bool, int]:
    s = parse_shape(shape)
    tiles = math.ceil(s.m / 64) * math.ceil(s.n / 64)
    return s.k >= 2048, sum(tiles > e for e in TILE_EDGES)


def fit(t: pd.DataFrame) -> dict:
    """bucket -> (method, geomean on the bucket's study shapes, shapes)."""
    by = defaultdict(list)
    for shape in t.index:
        by[bucket(shape)].append(shape)
    rule = {}
    for b, shapes in by.items():
        sub = t.loc[shapes]
        full = sub.dropna(axis=1)  # methods measured on every shape of the bucket
        scores = {m: geomean(full[m]) for m in full.columns}
        lib = scores.get(LIBRARY, 1.0)
        best = max((m for m in scores if m != LIBRARY), key=scores.get, default=None)
        if best is not None and scores[best] > lib:
            rule[b] = (best, scores[best], len(shapes))
        else:
            rule[b] = (LIBRARY, lib, len(shapes))
    return rule


def choose(rule: dict, shape: str) -> str:
    return rule.get(bucket(shape), (LIBRARY,))[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="study run Parquet files (the configs beside the library and baselines)")
    ap.add_argument("--shapes", action="append", default=[], help="class sample files to choose for")
    ap.add_argument("--chosen", help="write shape<TAB>method for the class shapes")
    ap.add_argument("--plan", help="write a compare plan: each class shape's choice beside the library")
    a = ap.parse_args(argv)
    t = speedup_table(load_rows(a.runs)[1])
    if LIBRARY not in t.columns:
        print("class_rule: the study has no library rows to compare against", file=sys.stderr)
        return 2
    rule = fit(t)
    print("| K >= 2048 | 64x64 tiles | study shapes | choice | geomean on them |\n|---|---|---|---|---|")
    for (deep, tb), (m, g, n) in sorted(rule.items()):
        lo = 0 if tb == 0 else TILE_EDGES[tb - 1] + 1
        hi = TILE_EDGES[tb] if tb < len(TILE_EDGES) else "more"
        print(f"| {'yes' if deep else 'no'} | {lo}-{hi} | {n} | {m} | {g:.3f}x |")
    # leave one out: the rule fitted without a study shape, scored on it
    loo = []
    for shape in t.index:
        m = choose(fit(t.drop(index=shape)), shape)
        v = t.loc[shape].get(m)
        loo.append(v if v == v and v is not None else t.loc[shape].get(LIBRARY))
    print(f"\nleave-one-out on the {len(t)} study shapes: geomean {geomean(loo):.3f}x "
          f"(the library {geomean(t[LIBRARY].dropna()):.3f}x)")
    shapes = [s.name for f in a.shapes for s in parse_shapes(f)]
    if shapes:
        picks = {s: choose(rule, s) for s in shapes}
        n_lib = sum(m == LIBRARY for m in picks.values())
        print(f"{len(shapes)} class shapes: {len(shapes) - n_lib} get a study config, {n_lib} the library")
        if a.chosen:
            with open(a.chosen, "w") as f:
                f.writelines(f"{s}\t{m}\n" for s, m in picks.items())
        if a.plan:
            with open(a.plan, "w") as f:
                f.write("# written by lab/fewtile/class_rule.py from " + " ".join(a.runs) + "\n")
                f.writelines(f"{s} {m.replace(',', ':')}" + (",library" if m != LIBRARY else "") + "\n"
                             for s, m in picks.items())
    return 0


if __name__ == "__main__":
    sys.exit(main())
