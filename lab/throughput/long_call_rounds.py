"""What stopping the offline rounds early would do on calls over 1 ms, replayed on a run's kept samples.

The grid's calls over 1 ms spend their time in rounds whose every sample is one power-capped call. For each such
shape of the run, the medians after the first 5 and 10 rounds against the run's own: the largest shift of a
speedup over cuBLASLt autotune (tn), whether the fastest entry stays the same, and the GPU time of the calls saved.

    python -m lab.throughput.long_call_rounds \
        results/runs/89-h200-library-grid100-cutlass/h200-library-grid100-cutlass.parquet
"""

from __future__ import annotations

import argparse

import pandas as pd

from harness.results import read_results, read_samples

REFERENCE = ("cublaslt-autotune", "tn")


def replay(samples: pd.DataFrame, rows: pd.DataFrame, cuts=(5, 10), min_call_us: float = 1000.0) -> pd.DataFrame:
    call_us = rows.groupby("shape")["device_us_median"].median()
    out = []
    for shape in call_us[call_us > min_call_us].index:
        g = samples[samples["shape"] == shape]
        wide = g.pivot_table(index="round", columns=["method", "layout"], values="value").sort_index().dropna(axis=1)
        full = wide.median()
        row = {"shape": shape, "call_us": round(float(call_us[shape])), "rounds": len(wide),
               "stop": rows[rows["shape"] == shape]["stop_reason"].iloc[0]}
        for r in cuts:
            early = wide.iloc[:r].median()
            shift = (early[REFERENCE] / early) / (full[REFERENCE] / full) - 1
            row[f"shift@{r}"] = round(float(shift.abs().max()), 4)
            row[f"same fastest@{r}"] = bool(early.idxmin() == full.idxmin())
            row[f"saved s@{r}"] = max(0, len(wide) - r) * float(full.sum()) / 1e6
        out.append(row)
    return pd.DataFrame(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    a = ap.parse_args(argv)
    samples = read_samples(a.run).to_pandas()
    samples = samples[(samples["mode"] == "offline") & (samples["cache"] == "warm")
                      & (samples["metric"] == "device_us")]
    rows = read_results(a.run).to_pandas()
    rows = rows[(rows["mode"] == "offline") & (rows["cache"] == "warm") & (rows["status"] == "ok")]
    t = replay(samples, rows)
    print(t.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"{len(t)} shapes; GPU time of the calls saved: at 5 rounds {t['saved s@5'].sum():.1f} s, "
          f"at 10 {t['saved s@10'].sum():.1f} s")


if __name__ == "__main__":
    main()
