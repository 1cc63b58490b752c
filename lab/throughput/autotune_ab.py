"""The default cuBLASLt autotune against a cheaper one measured beside it in the same compare run.

    python -m lab.throughput.autotune_ab RUN.parquet [--cheap METHOD]

The run holds ``cublaslt-autotune`` and a variant with fewer finalists or final rounds (e.g.
``cublaslt-autotune:keep=0.1,final_rounds=5``), both timed in the same interleaved rounds. Per shape:
the default's device time over the variant's (best of layouts; 1.0 = the cheaper tuning picked as
fast a kernel), then their geomean, the worst shape, and each method's summed ``setup_s`` (the whole
autotune: queries, validation, timing), i.e. what the cheaper tuning saves per shape.
"""

from __future__ import annotations

import argparse
import json
import math

from harness.results import read_results
from lab.throughput.batch_ab import best_times

DEFAULT = "cublaslt-autotune"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--cheap", default=None, help="the variant's method name (default: the one other autotune)")
    x = ap.parse_args()
    df = read_results(x.run).to_pandas()
    cheap = x.cheap or next(m for m in sorted(df["method"].unique()) if m.startswith(DEFAULT + ":"))
    t = best_times(df)[[DEFAULT, cheap]].dropna()
    r = t[DEFAULT] / t[cheap]
    geo = math.exp(r.apply(math.log).mean())
    print(f"{cheap} against {DEFAULT}, {len(r)} shapes: geomean {geo:.4f}x (1.0: picks as fast), "
          f"worst {r.min():.3f}x ({r.idxmin()}), best {r.max():.3f}x; below 0.99x: {(r < 0.99).sum()}")
    setup = df[df["method"].isin([DEFAULT, cheap])].groupby("method")["setup_s"].sum()
    n = df["shape"].nunique()
    for m in (DEFAULT, cheap):
        print(f"  {m}: autotune {setup[m]:.1f} s in all, {setup[m] / n:.3f} s a shape")
    # by the size of the call (the default's pick, best layout): where the saving comes from
    size = t[DEFAULT].rename("call_us")
    per = df[df["method"].isin([DEFAULT, cheap])].pivot_table(index="shape", columns="method", values="setup_s",
                                                              aggfunc="sum")
    bins = [0, 50, 1000, float("inf")]
    for lo, hi in zip(bins, bins[1:]):
        sel = per[per.index.isin(size[(size > lo) & (size <= hi)].index)]
        if len(sel):
            print(f"  calls {lo:g}-{hi:g} us: {len(sel)} shapes, setup_s {sel[DEFAULT].sum():.1f} s against "
                  f"{sel[cheap].sum():.1f} s ({sel[cheap].sum() / sel[DEFAULT].sum():.2f}x)")
    rows = df[df["method"] == cheap]
    how = rows["info"].map(lambda s: json.loads(s).get("screened_by", "") if isinstance(s, str) else "")
    if how.str.len().any():  # screen=validation: how each tuning screened (CUPTI, or the graph rounds and why)
        print("  screened by: " + "; ".join(f"{k} ({v} rows)" for k, v in how.value_counts().items()))


if __name__ == "__main__":
    main()
