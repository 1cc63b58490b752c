"""The offline stopping rule replayed on a run's kept samples: the rule in use against one on paired ratios.

Issue 35 asks for the whole grid in 10 minutes "with the same statistical stopping rule (or a stated, tested change
to it)". In use (``harness.timing.offline``): stop after round r >= ``min_rounds`` when every entry's median device
time has a 95 % CI half-width under 1 % of the median, or when the group's budget ends. On a power-capped H200 the
clock drifts between rounds, which widens every absolute median's CI alike; the rounds are interleaved precisely so
that drift hits all entries of a round together. The alternative replayed here: stop when every entry's ratio to
the group's reference entry, taken round by round (the paired statistic a speedup is), has a 95 % CI half-width
under 1 % of its median.

For each shape of the run this replays both rules on the kept per-round samples (``RUN.samples/``) and reports the
round each would stop at, the GPU time of the rounds saved (each entry's batch of calls at its median), and whether
the medians at the earlier stop rank the entries as the run's full medians do.

    python -m lab.throughput.stop_rule_sim results/runs/89-h200-library-grid100-cutlass/h200-library-grid100-cutlass.parquet
"""

from __future__ import annotations

import argparse
import glob
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from harness.timing.stats import rel_half_width

REFERENCE = "cublaslt-autotune"


def stop_round(series: dict[str, list[float]], min_rounds: int, target: float, max_round: int) -> int:
    """The first round count r >= min_rounds at which every series' median CI half-width is under target (else
    max_round: the run's own stop, budget or CI)."""
    for r in range(min_rounds, max_round + 1):
        if all(rel_half_width(v[:r]) <= target for v in series.values()):
            return r
    return max_round


def replay(samples: pd.DataFrame, rows: pd.DataFrame, min_rounds: int = 5, target: float = 0.01) -> pd.DataFrame:
    out = []
    for shape, g in samples[samples["metric"] == "device_us"].groupby("shape"):
        wide = g.pivot_table(index="round", columns=["method", "layout"], values="value").sort_index()
        wide = wide.dropna(axis=1, how="any")
        n = len(wide)
        if n < min_rounds or wide.shape[1] < 2:
            continue
        absolute = {f"{m}/{l}": list(wide[(m, l)]) for m, l in wide.columns}
        ref = (REFERENCE, "tn") if (REFERENCE, "tn") in wide.columns else wide.columns[0]
        ratios = {f"{m}/{l}": list(wide[(m, l)] / wide[ref]) for m, l in wide.columns if (m, l) != ref}
        r_abs = stop_round(absolute, min_rounds, target, n)
        r_rat = stop_round(ratios, min_rounds, target, n)
        shape_rows = rows[rows["shape"] == shape]
        batch = shape_rows.set_index(["method", "layout"])
        round_us = sum(float(batch.loc[c, "calls_per_batch"]) * float(batch.loc[c, "device_us_median"])
                       for c in wide.columns if c in batch.index)
        full = wide.median()
        early = wide.iloc[:r_rat].median()
        # the verdict a compare gives: which entry is fastest, and each entry's speedup over the reference
        same_best = full.idxmin() == early.idxmin()
        spd_full = full[ref] / full
        spd_early = early[ref] / early
        out.append(dict(shape=shape, rounds_run=n, stop_reason=str(shape_rows["stop_reason"].iloc[0]),
                        stop_abs=r_abs, stop_ratio=r_rat, round_ms=round_us / 1e3,
                        saved_ms=(r_abs - r_rat) * round_us / 1e3, same_fastest=same_best,
                        max_speedup_shift=float((spd_early / spd_full - 1).abs().max())))
    return pd.DataFrame(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", help="a compare run's Parquet; its samples folder RUN.samples/ must be beside it")
    ap.add_argument("--target", type=float, default=0.01)
    ap.add_argument("--min-rounds", type=int, default=5)
    a = ap.parse_args(argv)
    run = Path(a.run)
    files = glob.glob(str(run.with_suffix(".samples") / "*.parquet"))
    if not files:
        print(f"{run}: no samples folder beside it", file=sys.stderr)
        return 2
    samples = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    samples = samples[(samples["mode"] == "offline") & (samples["cache"] == "warm")]
    rows = pd.read_parquet(run)
    rows = rows[(rows["mode"] == "offline") & (rows["cache"] == "warm") & (rows["status"] == "ok")]
    t = replay(samples, rows, a.min_rounds, a.target)
    replay_ok = (t["stop_abs"] == t["rounds_run"]) | (t["stop_reason"] == "budget")
    print(f"{len(t)} shapes; the rule in use, replayed, stops where the run stopped on {replay_ok.sum()} "
          f"(the rest: the run's samples differ from what it judged, e.g. a dropped entry)")
    by = t.assign(size=pd.cut(t["round_ms"], [0, 2, 10, 50, math.inf], labels=["<2 ms", "2-10 ms", "10-50 ms", ">50 ms"]))
    summary = by.groupby("size", observed=True).agg(shapes=("shape", "size"), rounds_abs=("stop_abs", "median"),
                                                    rounds_ratio=("stop_ratio", "median"), saved_s=("saved_ms", "sum"),
                                                    budget_stops=("stop_reason", lambda s: (s == "budget").sum()))
    summary["saved_s"] /= 1e3
    print("by one round's GPU time (every entry's batch):")
    print(summary.to_string())
    print(f"GPU time of the rounds saved: {t['saved_ms'].sum() / 1e3:.1f} s over {len(t)} shapes "
          f"(rounds run {t['rounds_run'].sum()}, under the ratio rule {t['stop_ratio'].sum()})")
    print(f"the early stop names the same fastest entry on {t['same_fastest'].sum()} of {len(t)}; the largest shift of "
          f"a speedup over {REFERENCE}/tn: median {t['max_speedup_shift'].median():.4f}, max {t['max_speedup_shift'].max():.4f}")
    worst = t.sort_values("max_speedup_shift", ascending=False).head(5)
    print(worst[["shape", "rounds_run", "stop_abs", "stop_ratio", "max_speedup_shift", "same_fastest"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
