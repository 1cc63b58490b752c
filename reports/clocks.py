"""The clock chart's data: SM clock and power of a run's rows in measurement order.

Every measured row's NVML means, so throttling or a clock drop during the run is visible. A run
of more than MAX_CLOCK_POINTS rows is summarised in bins of consecutive rows per mode/cache, each
with its mean, min and max (a one-row dip stays visible in its bin's min), so the chart's data
stays bounded however long the run. Every row's own numbers are in the results file.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

MAX_CLOCK_POINTS = 120  # per mode/cache series


def _r(v):
    return None if v is None or not math.isfinite(v) else float(f"{v:.5g}")


def clock_series(raw: pd.DataFrame) -> list[dict]:
    """Points {series, row, rows, sm, sm_lo, sm_hi, power, power_lo, power_hi, throttled}: ``row``
    the first row of the point in measurement order, ``rows`` how many rows it summarises.
    Empty when the run has no readings (a CPU run)."""
    if raw["sm_clock_mhz_mean"].notna().sum() + raw["power_w_mean"].notna().sum() == 0:
        return []
    d = raw.sort_values("measured_at", kind="stable").reset_index(drop=True)
    d["order"] = np.arange(len(d))
    d["series"] = d["mode"] + "/" + d["cache"]
    d["thr"] = d["throttled"].fillna(False).astype(bool)
    out = []
    for series, g in d.groupby("series", sort=True):
        size = max(1, math.ceil(len(g) / MAX_CLOCK_POINTS))
        g = g.assign(bin=np.arange(len(g)) // size)
        agg = g.groupby("bin").agg(row=("order", "min"), rows=("order", "size"),
                                   sm=("sm_clock_mhz_mean", "mean"), sm_lo=("sm_clock_mhz_mean", "min"),
                                   sm_hi=("sm_clock_mhz_mean", "max"), power=("power_w_mean", "mean"),
                                   power_lo=("power_w_mean", "min"), power_hi=("power_w_mean", "max"),
                                   throttled=("thr", "sum"))
        for r in agg.to_dict("records"):
            out.append({"series": series, "row": int(r["row"]), "rows": int(r["rows"]),
                        **{k: _r(r[k]) for k in ("sm", "sm_lo", "sm_hi", "power", "power_lo", "power_hi")},
                        "throttled": int(r["throttled"])})
    return out
