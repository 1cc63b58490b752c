"""Speedups and leaderboard statistics, computed the only honest way: paired within one run.

A speedup (``harness.timing.stats.speedup``) is ``baseline median / method median`` for the same
(run, GPU, shape, mode, cache) and the same layout (a derived best-of-layouts row is paired with
the baseline's best-of-layouts row). Absolute times are never compared across runs or GPUs. A
method's score is the geometric mean of its per-shape speedups, with a bootstrap CI that
resamples shapes (``harness.timing.stats.geomean_ci``): it says how much the score depends on
which shapes happened to be in the set. Too few shapes for the level give no CI (NaN), and the
page says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.results import rankable
from harness.timing.stats import geomean, geomean_ci, speedup
from reports.derive import BEST, PAIR_KEY, gate_failed, metric_column, not_run

__all__ = ["Entry", "choose_baseline", "geomean", "geomean_ci", "leaderboard", "paired_speedups"]


FALLBACK_BASELINES = ("cublaslt-autotune", "cublaslt", "cublas", "torch")


def choose_baseline(view_rows: pd.DataFrame, requested: str, metric: str = "device") -> tuple[str | None, str]:
    """The baseline this view is ranked against, and a note when it is not the one requested.

    A baseline must have rankable rows in this view: on a CPU run the cuBLAS methods are recorded
    as unsupported, so the strongest baseline that did run is used instead (the cuBLAS family in
    order, then torch, then any other baseline), and the page says so.
    """
    col = metric_column(metric)
    ok = view_rows[rankable(view_rows, col)]
    methods = set(ok["method"])
    if requested in methods:
        return requested, ""
    bases = set(ok.loc[ok["is_baseline"].fillna(False).astype(bool), "method"])
    order = [b for b in FALLBACK_BASELINES if b in bases] + sorted(bases - set(FALLBACK_BASELINES))
    why = "was not measured in this view" if requested not in set(view_rows["method"]) else \
        "has no rankable rows in this view"
    if order:
        return order[0], f"Baseline {requested!r} {why}; speedups are over {order[0]!r} instead."
    return None, f"Baseline {requested!r} {why} and no other baseline has; no speedups in this view."


def paired_speedups(rows: pd.DataFrame, baseline: str | None, metric: str) -> pd.DataFrame:
    """``rows`` (rankable, with derived best rows) plus ``base_us`` and ``speedup`` columns.

    Pairs on (run, GPU, shape, mode, cache, layout); a row whose shape has no rankable baseline
    row gets NaN, so it is shown but not scored.
    """
    col = metric_column(metric)
    out = rows.copy()
    if baseline is None or out.empty:
        out["base_us"] = np.nan
        out["speedup"] = np.nan
        return out
    key = PAIR_KEY + ["layout"]
    base = out.loc[out["method"] == baseline, key + [col]].rename(columns={col: "base_us"})
    out = out.merge(base, on=key, how="left")
    out["speedup"] = speedup(out["base_us"], out[col])
    return out


@dataclass
class Entry:
    """One leaderboard line: a method in one layout (or its best-of-layouts row)."""

    label: str
    method: str
    layout: str
    is_baseline: bool
    geomean: float
    ci_lo: float
    ci_hi: float
    win_rate: float
    wins: int
    covered: int
    shapes_total: int
    gate_failures: int
    suspect: int
    median_us_geomean: float


def leaderboard(sp: pd.DataFrame, view_raw: pd.DataFrame, baseline: str | None, metric: str) -> list[Entry]:
    """Rank every (method, layout) entry of one view by geometric-mean speedup, best first.

    ``sp`` is the output of ``paired_speedups`` for this view; ``view_raw`` all rows of the view
    (ranked or not), used for the shape total and for counting gate failures and suspect rows.
    Entries without any paired shape sort last.
    """
    col = metric_column(metric)
    shapes_total = view_raw["shape"].nunique()
    below = view_raw["below_floor"].fillna(False).astype(bool)
    failed = gate_failed(view_raw)
    entries = []
    for (method, layout), g in sp.groupby(["method", "layout"], sort=True):
        scored = g[g["speedup"].notna()]
        s = scored["speedup"].to_numpy()
        lo, hi = geomean_ci(s)
        raw = view_raw["method"] == method
        if layout != BEST:
            raw = raw & (view_raw["layout"] == layout)
        entries.append(
            Entry(
                label=g["label"].iloc[0],
                method=method,
                layout=layout,
                is_baseline=method == baseline,
                geomean=geomean(s),
                ci_lo=lo,
                ci_hi=hi,
                win_rate=float(np.mean(s > 1.0)) if s.size else float("nan"),
                wins=int(np.sum(s > 1.0)),
                covered=int(scored["shape"].nunique()),
                shapes_total=int(shapes_total),
                gate_failures=int((raw & failed).sum()),
                suspect=int((raw & below).sum()),
                median_us_geomean=geomean(g[col].to_numpy()),
            )
        )
    # Also list methods that ran but never produced a rankable row (they failed the gate or were
    # suspect everywhere); methods that ran nothing (unsupported) are in the "not run" table.
    seen = {(e.method, e.layout) for e in entries}
    skip = not_run(view_raw)
    for (method, layout), g in view_raw.groupby(["method", "layout"], sort=True):
        if (method, layout) in seen or skip[g.index].all():
            continue
        entries.append(
            Entry(f"{method} ({layout})", method, layout, method == baseline, float("nan"), float("nan"),
                  float("nan"), float("nan"), 0, 0, int(shapes_total),
                  int((failed & (view_raw["method"] == method) & (view_raw["layout"] == layout)).sum()),
                  int((below & (view_raw["method"] == method) & (view_raw["layout"] == layout)).sum()),
                  float("nan"))
        )
    entries.sort(key=lambda e: (np.isnan(e.geomean), -(e.geomean if not np.isnan(e.geomean) else 0), e.label))
    return entries
