"""How much host time cuBLASLt autotune's graph captures cost over a run, estimated from its rows.

``time_candidates`` (``harness.timing.offline``) screens every valid candidate with a graph of
``SCREEN_BATCH_US`` worth of calls (one round of one uncaptured call where a call is longer than that) and times
the finalists (a quarter, at least 3) with graphs of ``FINAL_BATCH_US`` worth. Capturing costs host time per
captured call: 44 us for a cuBLASLt call inside a capture (``lab/throughput/NOTES.md``, call 4, an H200 host).
Screening candidates from CUPTI records of eager calls instead would save at most the screening captures; this
bounds that saving and the finals' part beside it, per call-size class.

    python -m lab.throughput.capture_estimate results/runs/111-h200-grid-886/*.parquet results/runs/112-*/*.parquet
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from harness.results import read_results
from harness.timing.offline import FINAL_BATCH_US, SCREEN_BATCH_US

CAPTURED_CALL_US = 44.0  # host time of one cuBLASLt call inside a capture (NOTES.md, call 4)
CLASSES = [(0, 5), (5, 10), (10, 20), (20, 50), (50, 200), (200, 1000), (1000, float("inf"))]


def batch(call_us: pd.Series, batch_us: float) -> pd.Series:
    """Calls in one sample's batch, as ``make_sampler`` sizes it (1 to 500)."""
    return (batch_us / call_us.clip(lower=0.5)).round().clip(1, 500)


def estimate(rows: pd.DataFrame, captured_call_us: float = CAPTURED_CALL_US) -> pd.DataFrame:
    """Per call-size class: tunings, autotune's setup_s, and the estimated screening and final capture seconds."""
    a = rows[(rows["method"] == "cublaslt-autotune") & (rows["status"] == "ok")].reset_index(drop=True)
    info = a["info"].map(lambda s: json.loads(s) if isinstance(s, str) else s)
    a = a[info.map(lambda i: i.get("tuned")) == "timed"]
    valid = info.map(lambda i: i.get("candidates_valid")).loc[a.index].astype(float)
    us = a["device_us_median"]
    screen_batch = batch(us, SCREEN_BATCH_US)  # a batch of one call is timed without a capture
    screen_s = (valid * screen_batch * captured_call_us * 1e-6).where((us < SCREEN_BATCH_US) & (screen_batch > 1), 0.0)
    finalists = (valid * 0.25).round().clip(lower=3).clip(upper=valid)
    final_batch = batch(us, FINAL_BATCH_US)
    final_s = (finalists * final_batch * captured_call_us * 1e-6).where(final_batch > 1, 0.0)
    out = []
    for lo, hi in CLASSES:
        m = (us >= lo) & (us < hi)
        out.append({"call (us)": f"{lo:g}-{hi:g}", "tunings": int(m.sum()), "setup_s": a["setup_s"][m].sum(),
                    "valid (mean)": valid[m].mean(), "screen captures (s)": screen_s[m].sum(),
                    "final captures (s)": final_s[m].sum()})
    table = pd.DataFrame(out)
    total = table.drop(columns=["call (us)", "valid (mean)"]).sum()
    return pd.concat([table, pd.DataFrame([{"call (us)": "all", **total, "valid (mean)": valid.mean()}])])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parquet", nargs="+")
    ap.add_argument("--captured-call-us", type=float, default=CAPTURED_CALL_US)
    args = ap.parse_args(argv)
    rows = pd.concat([read_results(p).to_pandas() for p in args.parquet], ignore_index=True)
    print(estimate(rows, args.captured_call_us).to_string(index=False, float_format=lambda x: f"{x:.1f}"))


if __name__ == "__main__":
    main()
