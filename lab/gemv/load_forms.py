"""The gemv weight-load forms (pf 1, 3, 4) against the best baseline, warm and cold, from one compare
run of ``load-forms-plan.txt`` with ``--cache both``.

    python -m lab.gemv.load_forms RUN.parquet

Per shape and cache: weight MB, the best baseline's time (best of layouts), each form's time and speedup
over it, and each form's weight bandwidth; then geomeans per cache over all shapes and over the shapes
whose weights are under 45 MB (where gemv lost warm).
"""

from __future__ import annotations

import argparse
import math
import re

import pandas as pd

from harness.results import read_results
from reports.derive import BEST, PAIR_KEY, with_best_of_layouts

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")


def gmean(s: pd.Series) -> float:
    s = s.dropna()
    return math.exp(sum(math.log(v) for v in s) / len(s)) if len(s) else float("nan")


def table(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df[PAIR_KEY] = df[PAIR_KEY].fillna("")
    rows = []
    for cache, part in df.groupby("cache"):
        best = with_best_of_layouts(part, "device")
        best = best[best["layout"] == BEST]
        t = best.pivot_table(index="shape", columns="method", values="device_us_median")
        base = t[[c for c in BASELINES if c in t.columns]].min(axis=1)
        for shape in t.index:
            m, n, k = map(int, shape.split("_"))
            row = {"cache": cache, "shape": shape, "weights_mb": n * k * 2 / 1e6, "base_us": base[shape]}
            for meth in t.columns:
                pf = re.search(r"pf=(\d)", meth)
                if meth.startswith("gemv:") and pf and pd.notna(t.at[shape, meth]):
                    us = t.at[shape, meth]
                    row[f"pf{pf.group(1)}_us"] = us
                    row[f"pf{pf.group(1)}_x"] = base[shape] / us
                    row[f"pf{pf.group(1)}_tbs"] = n * k * 2 / us / 1e6
            rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    x = ap.parse_args()
    t = table(read_results(x.run).to_pandas())
    pd.set_option("display.width", 240)
    print(t.sort_values(["cache", "weights_mb"]).round(3).to_string(index=False))
    for cache, part in t.groupby("cache"):
        small = part[part["weights_mb"] < 45]
        line = ", ".join(f"pf={pf} {gmean(part[f'pf{pf}_x']):.3f}x (under 45 MB {gmean(small[f'pf{pf}_x']):.3f}x)"
                         for pf in (1, 3, 4) if f"pf{pf}_x" in part)
        print(f"{cache}: {len(part)} shapes ({len(small)} under 45 MB): {line}")


if __name__ == "__main__":
    main()
