"""Best kernel-family config per shape vs the best cuBLAS-family baseline, from one compare run.

For each (shape, mode, cache): the baseline is ``--baseline`` in its faster layout; the
candidate is the fastest non-baseline row that passed the gate and the anti-cheat checks (any
layout). The speedup is the ratio of medians from the same run with a bootstrap CI over paired
rounds (harness.summary). Prints a markdown table.

    python3 scripts/best_family.py RESULTS.parquet [--baseline cublaslt-autotune]
"""

import argparse
import json

from harness.results import read_results, read_samples
from harness.summary import compute_speedups, rankable


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--baseline", default="cublaslt-autotune")
    args = ap.parse_args()
    df = read_results(args.results).to_pandas()
    samples = read_samples(args.results).to_pandas()
    sp = {(r.shape, r.mode, r.cache, r.method, r.layout): r.speedup
          for r in compute_speedups(df, samples, args.baseline)}
    ok = df[rankable(df)]
    print(f"| M_N_K | {args.baseline} us (best layout) | best family config | layout | us | speedup [95% CI] | "
          "families failing gate/anti-cheat | unsupported |")
    print("|---|---|---|---|---|---|---|---|")
    for (shape, mode, cache), g in df.groupby(["shape", "mode", "cache"], sort=False):
        base = ok[(ok["shape"] == shape) & (ok["method"] == args.baseline) & (ok["mode"] == mode)]
        fam = ok[(ok["shape"] == shape) & (~ok["is_baseline"]) & (ok["mode"] == mode)]
        bad = g[(~g["is_baseline"]) & g["status"].isin(["gate_failed", "error"])]
        uns = g[(~g["is_baseline"]) & (g["status"] == "unsupported")]
        b_us = base["device_us_median"].min() if len(base) else float("nan")
        if len(fam):
            best = fam.loc[fam["device_us_median"].idxmin()]
            s = sp.get((shape, mode, cache, best["method"], best["layout"]))
            spx = f"{s.ratio:.3f} [{s.lo:.3f}, {s.hi:.3f}]" if s else "-"
            row = f"{best['method']} | {best['layout']} | {best['device_us_median']:.2f} | {spx}"
        else:
            row = "- | - | - | -"
        print(f"| {shape} | {b_us:.2f} | {row} | {len(bad)} | {len(uns)} |")
    bad = df[(~df["is_baseline"]) & df["status"].isin(["gate_failed", "error"])]
    for _, r in bad.drop_duplicates(["method", "status_reason"]).head(20).iterrows():
        print(f"- {r['shape']} {r['layout']} {r['method']}: {r['status']}: {r['status_reason'][:300]}")
    info = df[~df["is_baseline"]]["info"].map(lambda s: json.loads(s or "{}").get("anticheat"))
    print(f"anti-cheat ran on {info.notna().sum()} family rows")


if __name__ == "__main__":
    main()
