"""Each split-K kernel beside its twin that sums the slices inside the GEMM's launch, from one compare
run of ``fused-ab-plan.txt`` (both forms and the four baselines measured side by side).

    python -m lab.fewtile.fused_ab RUN.parquet

Per shape and config (best of layouts, clean rows): the two-launch time, the fused time, fused over
two-launch, and each against the shape's best baseline (torch, cuBLAS, cuBLASLt, cuBLASLt autotune);
then geomeans over the pairs and over shapes (each form's best config per shape).
"""

from __future__ import annotations

import argparse
import math

import pandas as pd

from harness.results import read_results
from lab.throughput.batch_ab import best_times

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")


def gmean(s: pd.Series) -> float:
    s = s.dropna()
    return math.exp(sum(math.log(v) for v in s) / len(s)) if len(s) else float("nan")


def pairs(t: pd.DataFrame) -> pd.DataFrame:
    base = t[[c for c in BASELINES if c in t.columns]].min(axis=1)
    rows = []
    for m in t.columns:
        if not m.startswith("splitk_fused"):
            continue
        twin = m.replace("splitk_fused", "splitk_tma", 1)
        if twin not in t.columns:
            continue
        for shape in t.index[t[m].notna() & t[twin].notna()]:
            rows.append({"shape": shape, "config": m.split(":", 1)[1], "swap": "swap" in m.split(":")[0],
                         "two_launch_us": t.at[shape, twin], "fused_us": t.at[shape, m],
                         "fused_vs_two": t.at[shape, twin] / t.at[shape, m],
                         "two_vs_base": base[shape] / t.at[shape, twin], "fused_vs_base": base[shape] / t.at[shape, m]})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    x = ap.parse_args()
    t = best_times(read_results(x.run).to_pandas())
    p = pairs(t)
    if p.empty:
        raise SystemExit(f"{x.run}: no splitk_fused method beside its splitk_tma twin")
    pd.set_option("display.width", 220)
    pd.set_option("display.max_colwidth", 80)
    print(p.sort_values("fused_vs_two").round(3).to_string(index=False))
    print(f"\n{len(p)} pairs on {p['shape'].nunique()} shapes: fused over two-launch, geomean "
          f"{gmean(p['fused_vs_two']):.3f}x (min {p['fused_vs_two'].min():.3f}, max {p['fused_vs_two'].max():.3f})")
    best = p.groupby("shape")[["two_vs_base", "fused_vs_base"]].max()
    print(f"per shape, best config of each form over the best baseline: two-launch {gmean(best['two_vs_base']):.3f}x, "
          f"fused {gmean(best['fused_vs_base']):.3f}x ({len(best)} shapes)")


if __name__ == "__main__":
    main()
