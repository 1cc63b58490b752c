"""The gemv weight-load forms (pf 1, 3, 4) against the best baseline, warm and cold, from one compare
run of ``load-forms-plan.txt`` with ``--cache both``.

    python -m lab.gemv.load_forms RUN.parquet [--chosen NAME=FILE ...]

Per shape and cache: weight MB, the best baseline's time (best of layouts), each form's time and speedup
over it, and each form's weight bandwidth; then geomeans per cache over all shapes and over the shapes
whose weights are under 45 MB (where gemv lost warm). ``--chosen NAME=FILE`` (``shape<TAB>method``
lines, a rule's choice per shape) scores that rule instead: per cache, its method's speedup over the
best baseline per shape and the geomean.
"""

from __future__ import annotations

import argparse
import math
import re

import pandas as pd

from harness.results import read_results
from lab.throughput.batch_ab import best_times

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")


def gmean(s: pd.Series) -> float:
    s = s.dropna()
    return math.exp(sum(math.log(v) for v in s) / len(s)) if len(s) else float("nan")


def table(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for cache, part in df.groupby("cache"):
        t = best_times(part)
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


def rule_scores(df: pd.DataFrame, chosen: dict[str, dict[str, str]]) -> pd.DataFrame:
    """Per cache and shape: each rule's chosen method over the best baseline (best of layouts)."""
    rows = []
    for cache, part in df.groupby("cache"):
        t = best_times(part)
        base = t[[c for c in BASELINES if c in t.columns]].min(axis=1)
        for shape in t.index:
            row = {"cache": cache, "shape": shape}
            for name, pick in chosen.items():
                meth = pick.get(shape)
                row[name] = base[shape] / t.at[shape, meth] if meth in t.columns else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--chosen", action="append", default=[], help="NAME=FILE of shape<TAB>method lines")
    x = ap.parse_args()
    df = read_results(x.run).to_pandas()
    if x.chosen:
        chosen = {}
        for item in x.chosen:
            name, _, path = item.partition("=")
            chosen[name] = dict(ln.split("\t")[:2] for ln in open(path).read().splitlines() if "\t" in ln)
        r = rule_scores(df, chosen)
        pd.set_option("display.width", 240)
        print(r.round(3).to_string(index=False))
        for cache, part in r.groupby("cache"):
            print(f"{cache}: " + ", ".join(f"{n} {gmean(part[n]):.3f}x (min {part[n].min():.3f})" for n in chosen))
        return
    t = table(df)
    pd.set_option("display.width", 240)
    print(t.sort_values(["cache", "weights_mb"]).round(3).to_string(index=False))
    for cache, part in t.groupby("cache"):
        small = part[part["weights_mb"] < 45]
        line = ", ".join(f"pf={pf} {gmean(part[f'pf{pf}_x']):.3f}x (under 45 MB {gmean(small[f'pf{pf}_x']):.3f}x)"
                         for pf in (1, 3, 4) if f"pf{pf}_x" in part)
        print(f"{cache}: {len(part)} shapes ({len(small)} under 45 MB): {line}")


if __name__ == "__main__":
    main()
