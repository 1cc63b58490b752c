"""Replays the library's other-GPU rule on a compare run: what the run's library rows would have been had
another GPU model's kernel entries served only calls recorded under a threshold.

The run must hold ``library`` and ``cublaslt-autotune`` rows (``compare --methods library,torch,cublas,cublaslt,
cublaslt-autotune``). A library row served by another model's kernel entry (info ``library_match`` other-gpu,
``library_kind`` kernel) whose entry recorded a call of at least the threshold is replaced by the same run's
cuBLASLt autotune row of that shape and layout: the fallback calls autotune with the baseline's own tuning in the
same process, so its time is the baseline's. Printed per threshold: rows replaced, and the library over the best
baseline per shape (best of layouts; rows ok, gated and not below the floor), geomean, min and shapes below 0.98x.

    python -m lab.library.other_gpu_replay RUN.parquet [--library kernels_search/library/library.json]
        [--thresholds inf,2000,1000,500]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pandas as pd

from harness.results import rankable
from kernels_search.search.library import DEFAULT_PATH, serves_other_gpu


def replay(run: pd.DataFrame, entries: list[dict], threshold_us: float) -> tuple[int, pd.Series]:
    """(rows replaced, the library's speedup over the best baseline per shape) with the rule at ``threshold_us``."""
    ok = run[rankable(run, "device_us_median")]
    best_base = ok[ok["is_baseline"]].groupby("shape")["device_us_median"].min()
    autotune = ok[ok["method"] == "cublaslt-autotune"].set_index(["shape", "layout"])["device_us_median"]
    gpu = run["gpu_name"].iloc[0]  # a run never mixes GPU models
    other = {(e["shape"], e["spec"], e["layout"]): e for e in entries if e["gpu_name"] != gpu}
    lib = ok[ok["method"] == "library"]
    us, replaced = [], 0
    for row in lib.itertuples():
        info = json.loads(row.info)
        entry = other.get((info.get("library_shape"), info.get("library_spec"), row.layout))
        if (info.get("library_match") == "other-gpu" and entry is not None
                and not serves_other_gpu(entry, threshold_us) and (row.shape, row.layout) in autotune.index):
            us.append(autotune[(row.shape, row.layout)])
            replaced += 1
        else:
            us.append(row.device_us_median)
    best = pd.Series(us, index=lib["shape"].values).groupby(level=0).min()
    return replaced, best_base.reindex(best.index) / best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--library", default=str(DEFAULT_PATH))
    ap.add_argument("--thresholds", default="inf,2000,1000,500")
    a = ap.parse_args(argv)
    run = pd.read_parquet(a.run)
    entries = json.load(open(a.library))["entries"]
    print(f"{a.run}: {run['gpu_name'].iloc[0]}, run {run['run_id'].iloc[0]}")
    print("| other-GPU kernels serve calls under (us) | rows replaced | shapes | geomean | min | below 0.98x |")
    print("|---|---|---|---|---|---|")
    for t in a.thresholds.split(","):
        thr = math.inf if t == "inf" else float(t)
        n, sp = replay(run, entries, thr)
        sp = sp.dropna()
        print(f"| {t} | {n} | {len(sp)} | {np.exp(np.log(sp).mean()):.4f}x | {sp.min():.3f}x | {(sp < 0.98).sum()} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
