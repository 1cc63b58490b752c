"""Score the tma=1 plans (`lab/fewtile/tma_plan.py`): `triton_splitk`'s presets with tma=1 against the same presets
with tma=0, 64 x 128 with tma=1, and each against the best baseline, per run (best layout each, geomean over shapes).

    python3 -m lab.fewtile.tma_score RUN.parquet [RUN.parquet ...]
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

BASELINES = ["torch", "cublas", "cublaslt", "cublaslt-autotune"]


def geomean(x: pd.Series) -> float:
    return float(np.exp(np.log(x.dropna()).mean()))


def best_per_shape(run: pd.DataFrame) -> pd.DataFrame:
    """Device time per shape (rows) and method (columns), the better layout of each."""
    ok = run[run["status"] == "ok"]
    return ok.groupby(["shape", "method"])["device_us_median"].min().unstack()


def score(path: str) -> list[str]:
    run = pd.read_parquet(path)
    lines = [f"{path}: {len(run)} rows, {run['status'].value_counts().to_dict()}"]
    t = best_per_shape(run)
    ours = [c for c in t.columns if c.startswith("triton_splitk")]
    wide = [c for c in ours if "block_n=128" in c]
    ptr = [c for c in ours if "tma=0" in c]
    tma = [c for c in ours if "tma=1" in c and c not in wide]
    base = t[BASELINES].min(axis=1)
    r = t[ptr].min(axis=1) / t[tma].min(axis=1)
    lines.append(f"  better tma=1 preset over better tma=0 preset: {geomean(r):.3f}x ({r.min():.3f}-{r.max():.3f}), "
                 f"tma=1 faster on {(r > 1).sum()} of {len(r)}")
    for c in tma:
        same = c.replace("tma=1", "tma=0")
        lines.append(f"  same tile {c.split(',')[0].split(':')[1]},{c.split(',')[1]}: {geomean(t[same] / t[c]):.3f}x")
    rw = t[ptr].min(axis=1) / t[wide].min(axis=1)
    lines.append(f"  64 x 128 tma=1 over the better tma=0 preset: {geomean(rw):.3f}x, faster on {(rw > 1).sum()}")
    over = {name: geomean(base / t[cols].min(axis=1)) for name, cols in
            [("tma=0 presets", ptr), ("tma=1 presets", tma), ("64 x 128 tma=1", wide), ("library", ["library"]),
             ("library and tma=0 presets", ptr + ["library"]), ("library, tma=0 and tma=1", ours + ["library"])]}
    lines.append("  over the best baseline: " + ", ".join(f"{k} {v:.3f}x" for k, v in over.items()))
    return lines


def main(argv: list[str]) -> None:
    for path in argv:
        print("\n".join(score(path)))


if __name__ == "__main__":
    main(sys.argv[1:])
