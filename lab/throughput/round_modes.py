"""How far each method's median round sits above its fastest round, from a compare's kept samples.

Why: in a tune on an H100 (2026-12-06) the four baselines timed 5.76 us on 64_64_16384 in 6-round calls and 6.15 us
in 23-35-round calls, and in run 88 (H200) the cuBLAS-family baselines' per-round times on small deep-K shapes jump
between two levels (e.g. 256_256_16384 tn: 8.85-8.94 us in rounds 0, 8 and 10, 9.6 us in the rest) while the library's
kernel stays within 1 %. A median over rounds then reports whichever level most rounds hit, and a speedup over cuBLAS
on such a shape partly measures which level that was. Over the shapes with K >= --min-k, split into small (at most
131,072 outputs) and the rest, this prints per method the median over shape-layouts of p90/p10 of the per-round times
and of median/min, and the share of shape-layouts whose median round is more than 4 % above the fastest.

    python -m lab.throughput.round_modes results/runs/88-h200-fewtile-library-cutlass/*.parquet
"""

from __future__ import annotations

import argparse

import pandas as pd

from harness.results import read_samples


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a compare's results Parquet (its samples are read from RUN.samples/ beside it)")
    ap.add_argument("--min-k", type=int, default=2048)
    ap.add_argument("--min-rounds", type=int, default=10)
    a = ap.parse_args(argv)
    d = read_samples(a.results).to_pandas()
    d = d[d["metric"] == "device_us"]
    rows = []
    for (shape, meth, lay), g in d.groupby(["shape", "method", "layout"]):
        m, n, k = map(int, shape.split("_"))
        s = g.groupby("round")["value"].median()
        if k < a.min_k or len(s) < a.min_rounds:
            continue
        rows.append(dict(shape=shape, method=meth, layout=lay, small=m * n <= 131072,
                         spread=s.quantile(0.9) / s.quantile(0.1), above=s.median() / s.min()))
    r = pd.DataFrame(rows)
    if r.empty:
        print("no shape-layout with enough rounds")
        return
    t = r.groupby(["small", "method"]).agg(shape_layouts=("spread", "size"), p90_over_p10=("spread", "median"),
                                           median_over_min=("above", "median"),
                                           share_above_4pct=("above", lambda x: (x > 1.04).mean()))
    print(t.round(3).to_string())


if __name__ == "__main__":
    main()
