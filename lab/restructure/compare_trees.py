"""The library's speedup over cuBLASLt autotune per shape (best layout each, device time, offline warm),
from two compare runs of the same shapes (before and after the product/lab split), and their ratio.

    python3 lab/restructure/compare_trees.py BEFORE.parquet AFTER.parquet
"""

import sys

import pandas as pd

from harness.results import rankable, read_results
from harness.timing.stats import geomean


def speedups(path: str) -> pd.Series:
    df = read_results(path).to_pandas()
    df = df[(df["mode"] == "offline") & (df["cache"] == "warm")].reset_index(drop=True)
    ok = df[rankable(df)]
    best = ok.groupby(["shape", "method"])["device_us_median"].min().unstack()
    (lib,) = [m for m in best.columns if m.startswith("library")]  # its name carries the default path
    return best["cublaslt-autotune"] / best[lib]


def main(before: str, after: str) -> int:
    b, a = speedups(before), speedups(after)
    t = pd.DataFrame({"before": b, "after": a}).dropna()
    t["after/before"] = t["after"] / t["before"]
    print(t.round(3).to_string())
    r = t["after/before"]
    print(f"\n{len(t)} shapes: after/before geomean {geomean(r):.4f}, "
          f"min {r.min():.3f}, max {r.max():.3f}; within 2 %: {int(((r - 1).abs() <= 0.02).sum())} of {len(r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
