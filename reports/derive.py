"""Which rows may be ranked, and the derived best-of-layouts rows.

A row is rankable only if it was measured cleanly (``harness.results.rankable``: ``status ==
"ok"``, the correctness gate passed, not faster than the physical floor). Best-of-layouts rows
(CUDA-L2's "max") are derived here, never measured: for each
method and (run, GPU, shape, mode, cache), the rankable nn/tn row with the lowest time in the
chosen metric. The winner depends on the metric, so the derivation takes it as an argument.
"""

from __future__ import annotations

import pandas as pd

from harness.results import rankable

METRICS = {"device": "device_us_median", "host": "host_us_median"}
METRIC_LABELS = {
    "device": "device time (GPU time per call)",
    "host": "host time (wall clock of one synchronous call)",
}
BEST = "best"  # the layout value of a derived row
PAIR_KEY = ["run_id", "gpu_uuid", "shape", "mode", "cache"]


def metric_column(metric: str) -> str:
    try:
        return METRICS[metric]
    except KeyError:
        raise ValueError(f"unknown metric {metric!r}; expected one of {sorted(METRICS)}") from None


def gate_failed(df: pd.DataFrame) -> pd.Series:
    """Rows the correctness gate rejected (as opposed to methods that could not run a shape)."""
    return df["status"].eq("gate_failed").fillna(False) | (
        df["status"].eq("ok").fillna(False) & ~df["gate_passed"].fillna(False).astype(bool))


def not_run(df: pd.DataFrame) -> pd.Series:
    """Rows of methods that did not produce a measurement: unsupported shape/device, or an error."""
    return df["status"].isin(["unsupported", "error"]).fillna(False) | df["status"].isna()


def excluded_reason(row: pd.Series) -> str:
    """Why a row is not ranked, in words a reader can act on."""
    if row.get("status") != "ok":
        reason = row.get("status_reason")
        return f"{row.get('status')}" + (f": {reason}" if isinstance(reason, str) and reason else "")
    if not bool(row.get("gate_passed")):
        return "gate failed"
    if bool(row.get("below_floor")):
        return "below the physical floor (suspect timing)"
    return ""


def label(method: str, layout: str) -> str:
    return f"{method} [best layout]" if layout == BEST else f"{method} ({layout})"


def with_best_of_layouts(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rankable rows with a ``label`` column, plus one derived ``best`` row per method and group.

    The derived row is a copy of the winning layout's row with ``layout = "best"`` and
    ``best_of`` naming the winner (and ``derived = True``), so every number in it is a number
    that was measured.
    """
    col = metric_column(metric)
    rows = df[rankable(df, col)].copy()
    rows["derived"] = False
    rows["best_of"] = rows["layout"]
    if rows.empty:
        rows["label"] = pd.Series(dtype=str)
        return rows
    idx = rows.groupby(PAIR_KEY + ["method"], dropna=False)[col].idxmin()
    best = rows.loc[idx.values].copy()
    best["best_of"] = best["layout"]
    best["layout"] = BEST
    best["derived"] = True
    out = pd.concat([rows, best], ignore_index=True)
    out["label"] = [label(m, lay) for m, lay in zip(out["method"], out["layout"])]
    return out
