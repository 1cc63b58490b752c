"""The registered `triton_splitk` prediction (NOTEBOOK, 2026-12-06 second) scored on a plan run.

    python -m lab.fewtile.splitk_check RESULTS.parquet [...]

Per shape: the best baseline (fastest of the four cuBLAS-family methods over both layouts), its
efficiency against the floor, and the best `triton_splitk` config (best layout) with its speedup.
Then the three groups of the prediction: K >= 2048 class shapes with the baseline at <= 0.30 of the
floor (predicted >= 1.30x geomean), shapes with the baseline above 0.6 (predicted < 1.0x), and
K < 2048 class shapes with K >= 256 (predicted >= 1.10x); and which config won where.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from harness.shapes import parse_shape
from harness.timing.stats import geomean
from lab.skinny.table import BASELINES, floor_us, klass, load_rows


def table(paths) -> pd.DataFrame:
    _, ok = load_rows(paths)
    rows = []
    for shape, g in ok.groupby("shape", sort=False):
        base = g[g["method"].isin(BASELINES)]
        ours = g[g["family"] == "triton_splitk"]
        if base.empty or ours.empty:
            continue
        b = base["device_us_median"].min()
        best = ours.loc[ours["device_us_median"].idxmin()]
        per_cfg = ours.groupby("method")["device_us_median"].min()
        rows.append(dict(shape=shape, cls=klass(shape), k=parse_shape(shape).k, base_us=b,
                         base_eff=floor_us(shape) / b, us=best["device_us_median"], speedup=b / best["device_us_median"],
                         layout=best["layout"], config=best["method"].split(":", 1)[1],
                         split=_split(best), cfgs=len(per_cfg)))
    return pd.DataFrame(rows)


def _split(row) -> int | None:
    import json

    try:
        return json.loads(row["info"] or "{}").get("split_k")
    except Exception:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    args = ap.parse_args()
    t = table(args.results)
    if t.empty:
        print("no shape with both a baseline and a triton_splitk row")
        return 1
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_colwidth", 80):
        print(t.sort_values(["cls", "base_eff"]).round(3).to_string(index=False))
    groups = {
        "K >= 2048, baseline <= 0.30 of the floor (predicted >= 1.30x)":
            t[(t["cls"] == "few-tile K >= 2048") & (t["base_eff"] <= 0.30)],
        "baseline > 0.6 of the floor (predicted < 1.0x)": t[t["base_eff"] > 0.6],
        "K < 2048 class, K >= 256 (predicted >= 1.10x)": t[(t["cls"] == "few-tile K < 2048") & (t["k"] >= 256)],
    }
    print()
    for name, g in groups.items():
        if len(g):
            print(f"{name}: {len(g)} shapes, best config per shape {geomean(g['speedup']):.3f}x "
                  f"(min {g['speedup'].min():.3f}x, max {g['speedup'].max():.3f}x)")
    for cls, g in t.groupby("cls"):
        print(f"{cls}: {len(g)} shapes, best triton_splitk config {geomean(g['speedup']):.3f}x over the best baseline, "
              f"{(g['speedup'] >= 1.02).sum()} at >= 1.02x")
    print("\nwins (>= 1.02x) by config:", t[t["speedup"] >= 1.02]["config"].value_counts().to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
