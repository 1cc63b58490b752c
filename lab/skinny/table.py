"""Per-shape table of a skinny study run: the best cuBLAS-family baseline against each kernel-family config.

    python3 lab/skinny/table.py RESULTS.parquet [--chosen FILE] [--pivot] [--by-class] [--cache cold]

For each shape: the best baseline (the fastest of torch, cublas, cublaslt, cublaslt-autotune over
both layouts, rows that passed the gate), its efficiency against the physical floor
(max(bytes / DRAM rate, FLOPs / 990 TFLOP/s, 1 us) / time, at the run's GPU's DRAM rate: 4.8 TB/s on an H200), and the best family config (best
layout) with its speedup over that baseline, its bytes moved / time in TB/s, and its efficiency.
Geomeans per shape class follow; --by-class adds each family config's geomean per class (over the
class's shapes it was measured on, counted); --cache cold scores the run's cold rows instead of the warm.
"""

from __future__ import annotations

import argparse
import math
import sys

import pandas as pd

from harness.problem import LAUNCH_FLOOR_US, Problem
from harness.results import read_results
from harness.shapes import parse_shape, parse_shapes
from harness.summary import rankable
from harness.timing.stats import geomean as geo

BASELINES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")


def floor_us(shape: str, gpu_name: str = "NVIDIA H200") -> float:
    """The shape's physical floor on ``gpu_name`` (its DRAM rate: an H100's is 3.35 TB/s, an H200's 4.8)."""
    return max(Problem(parse_shape(shape)).floor_us(gpu_name), LAUNCH_FLOOR_US)


def tbps(shape: str, us: float) -> float:
    return Problem(parse_shape(shape)).min_bytes / (us * 1e-6) / 1e12


def klass(shape: str) -> str:
    s = parse_shape(shape)
    if s.m <= 32:
        return "decode (M <= 32)"
    tiles = math.ceil(s.m / 128) * math.ceil(s.n / 128)
    if tiles < 132:
        return "few-tile K >= 2048" if s.k >= 2048 else "few-tile K < 2048"
    return "132+ tiles"


def load_rows(paths, cache: str = "warm") -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs' offline rows of one cache state, and those of them that rank (passed the gate, timed)."""
    df = pd.concat([read_results(p).to_pandas() for p in paths], ignore_index=True)
    df = df[(df["mode"] == "offline") & (df["cache"] == cache)].reset_index(drop=True)
    return df, df[rankable(df)]


def speedup_table(ok: pd.DataFrame) -> pd.DataFrame:
    """Speedup of every family config (best layout) over the shape's best baseline: shape x method."""
    base = ok[ok["method"].isin(BASELINES)].groupby("shape")["device_us_median"].min()
    fam = ok[~ok["method"].isin(BASELINES) & ~ok["is_baseline"]]
    best = fam.groupby(["shape", "method"])["device_us_median"].min().reset_index()
    best["speedup"] = best["shape"].map(base) / best["device_us_median"]
    return best.pivot(index="shape", columns="method", values="speedup")


def pivot(ok: pd.DataFrame) -> None:
    """Speedup of every family config (best layout) over the shape's best baseline, per shape."""
    t = speedup_table(ok)
    names = {m: f"c{i}" for i, m in enumerate(t.columns)}
    for m, c in names.items():
        s = t[m].dropna()
        print(f"{c}: {m}  ({len(s)} shapes, geomean {geo(s):.3f}x, min {s.min():.3f}x)")
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_rows", 500):
        print(t.rename(columns=names).round(3).to_string())
    print()


def by_class(ok: pd.DataFrame) -> None:
    """Each family config's geomean speedup per shape class, over the class's shapes it was measured on."""
    t = speedup_table(ok)
    for cls, shapes in t.groupby(t.index.map(klass)).groups.items():
        sub = t.loc[shapes]
        print(f"{cls} ({len(sub)} shapes):")
        scores = sorted(((geo(sub[m].dropna()), m, sub[m].notna().sum()) for m in sub.columns if sub[m].notna().any()),
                        reverse=True)
        for g, m, n in scores:
            print(f"  {g:.3f}x  {m}  ({n} shapes)")
    print()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--chosen", help="file of 'shape<TAB>method' lines: report only that method per shape")
    ap.add_argument("--pivot", action="store_true", help="also each family config's speedup per shape, and its geomean")
    ap.add_argument("--by-class", action="store_true", help="also each family config's geomean per shape class")
    ap.add_argument("--cache", default="warm", choices=("warm", "cold"), help="which rows to score (default warm)")
    args = ap.parse_args()
    df, ok = load_rows(args.results, args.cache)
    chosen = None
    if args.chosen:
        chosen = dict(ln.split("\t")[:2] for ln in open(args.chosen).read().splitlines() if "\t" in ln)
    rows = []
    for shape, g in ok.groupby("shape", sort=False):
        base = g[g["method"].isin(BASELINES)]
        if base.empty:
            continue
        b = base.loc[base["device_us_median"].idxmin()]
        fam = g[~g["method"].isin(BASELINES) & ~g["is_baseline"]]
        if chosen is not None:
            fam = fam[fam["method"] == chosen.get(shape, "")]
        best = fam.loc[fam["device_us_median"].idxmin()] if len(fam) else None
        bad = df[(df["shape"] == shape) & ~df["is_baseline"] & df["status"].isin(["gate_failed", "error"])]
        f = floor_us(shape, b["gpu_name"])
        rows.append(dict(
            shape=shape, cls=klass(shape), base=f"{b['method']}/{b['layout']}", base_us=b["device_us_median"],
            base_eff=f / b["device_us_median"], base_tbps=tbps(shape, b["device_us_median"]),
            best=(f"{best['method']}/{best['layout']}" if best is not None else "-"),
            us=(best["device_us_median"] if best is not None else float("nan")),
            speedup=(b["device_us_median"] / best["device_us_median"] if best is not None else float("nan")),
            eff=(f / best["device_us_median"] if best is not None else float("nan")),
            tbps=(tbps(shape, best["device_us_median"]) if best is not None else float("nan")),
            failed=len(bad)))
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 70,
                           "display.max_rows", 500):
        print(t.round(3).to_string(index=False))
    print()
    for cls, g in t.groupby("cls"):
        s = g["speedup"].dropna()
        print(f"{cls}: {len(g)} shapes, speedup geomean {geo(s):.3f}x (min {s.min():.3f}x), "
              f"baseline eff {geo(g['base_eff']):.3f}, ours {geo(g['eff'].dropna()):.3f}")
    if args.pivot:
        pivot(ok)
    if args.by_class:
        by_class(ok)
    left_out = sorted(set(df["shape"]) - set(t["shape"] if len(t) else []))
    if left_out:  # no rankable baseline row: e.g. every row flagged below the physical floor (operands in L2)
        why = {s: ("below the floor" if df[df["shape"] == s]["below_floor"].fillna(False).astype(bool).all() else
                   "no rankable baseline row") for s in left_out}
        print("left out (" + str(len(left_out)) + "): " + ", ".join(f"{s} ({w})" for s, w in why.items()))
    bad = df[~df["is_baseline"] & df["status"].isin(["gate_failed", "error"])]
    for _, r in bad.drop_duplicates(["method", "status_reason"]).head(15).iterrows():
        print(f"- FAILED {r['shape']} {r['layout']} {r['method']}: {r['status']}: {str(r['status_reason'])[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
