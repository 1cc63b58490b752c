"""Two compare runs of the same shapes that differ only in ``--batch-us``: do they rank alike, and what
did the shorter batches save?

    python -m lab.throughput.batch_ab A.parquet B.parquet [--wall-a S --wall-b S]

Per run: each method's geomean speedup over cuBLASLt autotune (best of layouts, ``reports.derive``'s
clean rows); across the runs: per (shape, method) the log-ratio of its speedup in B to that in A
(median and 90th percentile of its absolute value), how often the fastest method of a shape is the
same, and the rounds each needed (median). Ratios, not absolute times, are compared across the two
runs (clocks and power move between runs).
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

from harness.results import read_results
from reports.derive import BEST, PAIR_KEY, with_best_of_layouts

BASE = "cublaslt-autotune"


def best_times(df: pd.DataFrame) -> pd.DataFrame:
    """Device us per shape (rows) and method (columns), each the better layout's, clean rows only."""
    df = df.copy()
    df[PAIR_KEY] = df[PAIR_KEY].fillna("")  # CPU rows have no gpu_uuid
    best = with_best_of_layouts(df, "device")
    best = best[best["layout"] == BEST]
    return best.pivot_table(index="shape", columns="method", values="device_us_median")


def speedups(path: str, base: str = BASE) -> pd.DataFrame:
    t = best_times(read_results(path).to_pandas())
    return t.rdiv(t[base], axis=0)  # the baseline's time / the method's


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--wall-a", type=float)
    ap.add_argument("--wall-b", type=float)
    ap.add_argument("--baseline", default=BASE)
    x = ap.parse_args()
    sa, sb = speedups(x.a, x.baseline), speedups(x.b, x.baseline)
    shapes = sa.index.intersection(sb.index)
    sa, sb = sa.loc[shapes], sb.loc[shapes]
    for name, s in (("A", sa), ("B", sb)):
        geo = {m: math.exp(s[m].apply(math.log).mean()) for m in s.columns}
        print(f"{name}: " + ", ".join(f"{m} {v:.4f}x" for m, v in sorted(geo.items())))
    d = (sb / sa).apply(lambda c: c.apply(math.log)).abs().stack()
    print(f"{len(shapes)} shapes; |log(speedup B / speedup A)|: median {d.median():.4f}, p90 {d.quantile(0.9):.4f}")
    print(f"fastest method the same on {(sa.idxmax(axis=1) == sb.idxmax(axis=1)).mean():.0%} of the shapes")
    for name, p in (("A", x.a), ("B", x.b)):
        r = read_results(p).to_pandas()
        print(f"{name}: rounds median {r['rounds'].median():.0f}, calls per batch median {r['calls_per_batch'].median():.0f}")
    if x.wall_a and x.wall_b:
        print(f"wall: A {x.wall_a:.0f} s, B {x.wall_b:.0f} s ({x.wall_b / x.wall_a:.2f}x)")


if __name__ == "__main__":
    main()
