"""A compare's speedups recomputed from its host-sampled rounds alone and from the later rounds alone.

Why: on an H100 (contextab, 2026-12-06) the cuBLAS-family baselines' lowest level on small deep-K shapes occurred only
in rounds 0-9, the rounds in which the offline loop follows each device sample by one synchronous eager call
(``OfflineSettings.host_rounds``). If the same holds on the H200, a few-tile speedup over cuBLAS depends on how many of
a shape's rounds came after round 9. This takes a compare's kept samples and, per shape, the best baseline (fastest of
the four over both layouts, each entry's median over the chosen rounds) against ``--method`` (best layout): from all
rounds, from rounds < ``--host-rounds``, and from the later rounds where a shape has at least ``--min-late`` of them;
then the geomean per class (lab/skinny/table.py's classes) over the shapes that have all three.

    python -m lab.throughput.host_round_split results/runs/88-h200-fewtile-library-cutlass/*.parquet [--method library]
"""

from __future__ import annotations

import argparse

import pandas as pd

from harness.results import read_samples
from harness.timing.stats import geomean
from lab.skinny.table import BASELINES, klass


def speedups(d: pd.DataFrame, method: str) -> float:
    med = d.groupby(["method", "layout"])["value"].median()
    base = med[med.index.get_level_values(0).isin(BASELINES)]
    ours = med[med.index.get_level_values(0) == method]
    return base.min() / ours.min() if len(base) and len(ours) else float("nan")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a compare's results Parquet (its samples are read from RUN.samples/ beside it)")
    ap.add_argument("--method", default="library")
    ap.add_argument("--host-rounds", type=int, default=10)
    ap.add_argument("--min-late", type=int, default=5)
    a = ap.parse_args(argv)
    d = read_samples(a.results).to_pandas()
    d = d[(d["metric"] == "device_us") & (d["mode"] == "offline") & (d["cache"] == "warm")]
    rows = []
    for shape, g in d.groupby("shape"):
        early, late = g[g["round"] < a.host_rounds], g[g["round"] >= a.host_rounds]
        m, n, _ = map(int, shape.split("_"))
        rows.append(dict(shape=shape, cls=klass(shape), small=m * n <= 131072, rounds=int(g["round"].max()) + 1,
                         all=speedups(g, a.method), early=speedups(early, a.method),
                         late=speedups(late, a.method) if late["round"].nunique() >= a.min_late else float("nan")))
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", 300):
        print(t[t["late"].notna()].sort_values(["cls", "shape"]).round(3).to_string(index=False))
    print(f"\n{a.method} over the best baseline, geomean; 'early' from rounds < {a.host_rounds} only, 'late' from the rest")
    for (cls, small), g in t.groupby(["cls", "small"]):
        both = g[g["late"].notna()]
        print(f"  {cls}, {'<=' if small else '>'} 131,072 outputs: {len(g)} shapes, all rounds {geomean(g['all']):.3f}x, "
              f"early {geomean(g['early']):.3f}x; {len(both)} with >= {a.min_late} later rounds: all "
              f"{geomean(both['all']):.3f}x, early {geomean(both['early']):.3f}x, late {geomean(both['late']):.3f}x")


if __name__ == "__main__":
    main()
