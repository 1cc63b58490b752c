"""Do the baselines time alike in a tune's paired calls and in a compare? (the tune-context question)

Why: on an H100 (2026-12-06) `tune` timed cuBLASLt autotune on small deep-K shapes (64_64_16384, 512_64_4096,
64_512_12288, 256_128_8192) at 5.75-5.78 us in each shape's first two paired calls and at 6.14-6.21 us in most calls
after them, while the compare that followed timed it at 5.77 us; a kernel's paired speedup from those calls is
inflated by the baselines' slowdown (64_64_16384 nn: 1.032x in two tune calls, 0.983x in the compare).
This prints, per shape and layout, each baseline's device time in every source given: compare runs (a Parquet each)
and tune DBs (a kernel DB folder each: one column per paired call, in order), so a run of baselines alone, a run with
many candidates in every round and a fresh tune can be read side by side.

    python -m lab.throughput.context_ab LABEL=RUN.parquet ... LABEL=TUNE_DIR/db ... [--method cublaslt-autotune]
"""

from __future__ import annotations

import argparse
import os

import pandas as pd

from harness.results import read_samples, samples_dir


def load(path: str) -> pd.DataFrame:
    if os.path.isdir(path):
        from kernels_search.search.db import KernelDB

        return KernelDB(path).df
    return pd.read_parquet(path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", help="LABEL=PATH (a compare Parquet or a kernel DB folder)")
    ap.add_argument("--method", default="cublaslt-autotune")
    a = ap.parse_args(argv)
    for src in a.sources:
        label, path = src.split("=", 1)
        df = load(path)
        df = df[(df["status"] == "ok") & (df["method"] == a.method)]
        if "mode" in df:
            df = df[df["mode"] == "offline"]
        print(f"== {label} ({path}): {a.method} device us")
        for (shape, layout), g in df.groupby(["shape", "layout"]):
            g = g.sort_values([c for c in ("measured_at", "round") if c in g])  # measured_at has whole seconds
            us = g["device_us_median"].tolist()
            tail = " ".join(f"{x:.2f}" for x in us) if len(us) > 1 else ""
            print(f"  {shape:>16} {layout}  median {pd.Series(us).median():7.3f}  min {min(us):7.3f}  "
                  f"{len(us)} call(s)  {tail}")
        rounds(path, a.method)


def rounds(path: str, method: str) -> None:
    """A compare's kept samples (RUN.samples/ beside RUN.parquet): the method's device time in rounds 0-5 against
    the later rounds, per shape and layout (does a long call drift?)."""
    if os.path.isdir(path):  # a tune DB keeps no per-round samples
        return
    d = read_samples(path).to_pandas()
    d = d[(d["metric"] == "device_us") & (d["method"] == method)]
    if d.empty:
        return
    print(f"  per round ({samples_dir(path)}): median of rounds 0-5, of rounds 6+, rounds")
    for (shape, layout), g in d.groupby(["shape", "layout"]):
        early, late = g[g["round"] < 6]["value"].median(), g[g["round"] >= 6]["value"].median()
        print(f"  {shape:>16} {layout}  {early:7.3f}  {late:7.3f}  {g['round'].max() + 1}")


if __name__ == "__main__":
    main()
