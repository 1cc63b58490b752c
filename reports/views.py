"""Split the data into views that are never mixed, and compute each view's content.

A *run* is one (run_id, GPU) pair. Inside a run, a *view* is one (mode, cache, metric)
combination: offline vs server, warm vs cold, device vs host time are separate rankings, so a
leaderboard never averages numbers that measure different things. The page draws its charts
from a view's table rows; nothing here renders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.results import rankable
from harness.timing.stats import CONFIDENCE, min_samples_for_ci
from reports.clocks import clock_series
from reports.derive import BEST, METRIC_LABELS, METRICS, excluded_reason, metric_column, with_best_of_layouts
from reports.environment import environment, is_cpu, methodology
from reports.headline import is_full_comparison
from reports.keys import method_keys
from reports.runname import run_name
from reports.shapeclass import shape_class
from reports.stats import Entry, choose_baseline, leaderboard, paired_speedups

MODE_ORDER = ["offline", "server"]
CACHE_ORDER = ["warm", "cold"]
METRIC_ORDER = ["device", "host"]
TABLE_COLUMNS = ["m", "n", "k", "layout", "method", "time_us", "ci_lo", "ci_hi", "speedup", "tflops",
                 "efficiency", "flags", "shape_class", "origin"]
TABLE_ORDER = ["m", "n", "k", "method", "layout"]


@dataclass
class View:
    id: str
    mode: str
    cache: str
    metric: str
    metric_label: str
    baseline: str | None
    baseline_note: str
    entries: list[Entry]
    table: list[list]
    compile_s: dict[str, float] = field(default_factory=dict)  # method -> median compile_s (methods with one)


@dataclass
class Run:
    id: str
    run_id: str
    gpu_uuid: str | None
    gpu_name: str
    cpu: bool
    name: str  # readable (reports.runname)
    label: str  # name, GPU and start time: what the run list shows
    sources: list[int]
    env: list[tuple[str, str]]
    methodology: list[str]
    clocks: list[dict]  # reports.clocks.clock_series
    excluded: list[dict]
    unsupported: list[dict]
    keys: dict[str, str] = field(default_factory=dict)  # method -> short key, for this run's methods
    roles: dict[str, str] = field(default_factory=dict)  # method -> baseline | peer | kernel
    full: bool = False  # a full comparison (reports.headline)
    started: str = ""
    last: str = ""  # the last row's measured_at, as text (sorts in time order)
    views: list[View] = field(default_factory=list)


def _order(values, preferred: list[str]) -> list[str]:
    vals = list(pd.unique(values))
    return [v for v in preferred if v in vals] + sorted(v for v in vals if v not in preferred)


def _r(v, digits: int = 4):
    """Round for the page's JSON; NaN becomes null."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    if isinstance(v, float):
        return float(f"{v:.{digits}g}")
    return v


def _too_few_rounds(r: dict) -> bool:
    """Fewer rounds than a median CI at the stated level needs (files written before that rule
    hold the min-max of those rounds there: it is not shown as a CI)."""
    return pd.notna(r.get("rounds")) and int(r["rounds"]) < min_samples_for_ci(CONFIDENCE)


def _flags(r: dict) -> str:
    """Caveats a reader should see next to a number (the row is still ranked)."""
    out = []
    if _too_few_rounds(r):
        out.append(f"no {CONFIDENCE:.0%} CI ({int(r['rounds'])} rounds; it needs {min_samples_for_ci(CONFIDENCE)})")
    if r.get("throttled") is True:
        out.append("throttled" + (f" ({r['throttle_reasons']})" if r.get("throttle_reasons") else ""))
    if r.get("stop_reason") in ("budget", "max_rounds"):
        out.append(f"CI target not reached ({r['stop_reason']})")
    return "; ".join(out)


def _with_table_rows(sp: pd.DataFrame) -> pd.DataFrame:
    """``sp`` with ``row``: each row's index in the view's per-shape table (sorted by TABLE_ORDER).
    ``sp`` keeps its order: the leaderboard's bootstrap CIs follow it."""
    sp = sp.reset_index(drop=True)
    in_table_order = sp.sort_values(TABLE_ORDER, kind="stable").index.to_numpy()
    row = np.empty(len(sp), dtype=int)
    row[in_table_order] = np.arange(len(sp))
    sp["row"] = row
    return sp


def _table(sp: pd.DataFrame, metric: str) -> list[list]:
    """The per-shape table: one row per row of ``sp``, in the order of ``sp["row"]``."""
    col = metric_column(metric)
    out = []
    for r in sp.sort_values("row").to_dict("records"):
        t = r[col]
        fl = 2.0 * r["m"] * r["n"] * r["k"]
        lay = f"best ({r['best_of']})" if r["layout"] == BEST else r["layout"]
        ci = (r["device_us_ci_lo"], r["device_us_ci_hi"]) if metric == "device" and not _too_few_rounds(r) \
            else (None, None)
        eff = r["floor_us"] / t if pd.notna(r["floor_us"]) else None
        out.append([int(r["m"]), int(r["n"]), int(r["k"]), lay, r["method"], _r(t), _r(ci[0]), _r(ci[1]),
                    _r(r["speedup"]), _r(fl / (t * 1e-6) / 1e12), _r(eff), _flags(r),
                    shape_class(int(r["m"]), int(r["n"]), int(r["k"])), _origin(r)])
    return out


def _origin(r: dict) -> str:
    """Where a model shape comes from: "model layer" pairs, "; "-joined ("" for plain shapes)."""
    models, layers = r.get("source_model"), r.get("source_layer")
    if not isinstance(models, str) or not models:
        return ""
    ls = layers.split(";") if isinstance(layers, str) else []
    return "; ".join(f"{m} {ls[i]}" if i < len(ls) else m for i, m in enumerate(models.split(";")))


def build_view(vid: str, raw: pd.DataFrame, mode: str, cache: str, metric: str, baseline: str) -> View:
    """Everything one view shows; ``raw`` is every row of one run/GPU in this mode and cache."""
    base, note = choose_baseline(raw, baseline, metric)
    rows = with_best_of_layouts(raw, metric)
    sp = _with_table_rows(paired_speedups(rows, base, metric))
    entries = leaderboard(sp, raw, base, metric)
    compiled = raw[raw["compile_s"].notna()] if "compile_s" in raw else raw.iloc[:0]
    compile_s = {m: float(v) for m, v in compiled.groupby("method")["compile_s"].median().items()}
    return View(vid, mode, cache, metric, METRIC_LABELS[metric], base, note, entries, _table(sp, metric), compile_s)


def _excluded(raw: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """Gate failures, errors and suspect rows one by one; unsupported rows summarized per method
    (a CPU run marks every GPU-only method unsupported on every shape: one line each is enough)."""
    bad = raw[~rankable(raw)].sort_values(["mode", "cache", "m", "n", "k", "method", "layout"])
    unsup = bad["status"].eq("unsupported").fillna(False)
    rows = []
    for r in bad[~unsup].to_dict("records"):
        rows.append({
            "mode": r["mode"], "cache": r["cache"], "shape": r["shape"], "layout": r["layout"],
            "method": r["method"], "why": excluded_reason(r),
            "suspect": bool(r["below_floor"]) if pd.notna(r["below_floor"]) else False,
            "rel_fro": _r(r["gate_rel_fro_err"], 3), "tol_rel_fro": _r(r["gate_tol_rel_fro"], 3),
            "max_norm": _r(r["gate_max_norm_err"], 3), "tol_max_norm": _r(r["gate_tol_max_norm"], 3),
            "device_us": _r(r["device_us_median"]), "floor_us": _r(r["floor_us"]),
        })
    summary = []
    for (method, reason), g in bad[unsup].groupby(["method", bad.loc[unsup, "status_reason"].fillna("")]):
        summary.append({"method": method, "reason": reason or "unsupported", "rows": len(g),
                        "shapes": g["shape"].nunique(), "layouts": ", ".join(sorted(g["layout"].unique()))})
    return rows, summary


def _role(raw: pd.DataFrame, method: str) -> str:
    """baseline (cuBLAS family or torch), peer (another tool's GEMM: family ``peer``) or kernel."""
    r = raw[raw["method"] == method].iloc[0]
    if bool(r["is_baseline"]) if pd.notna(r["is_baseline"]) else False:
        return "baseline"
    return "peer" if r["family"] == "peer" else "kernel"


def build_runs(df: pd.DataFrame, baseline: str, metric: str, paths: list | None = None) -> list[Run]:
    """One Run per (run_id, GPU), each with its views; the requested metric's views come first.

    ``paths``: the results file of each ``source`` index, for the names of runs without a label.
    Runs are listed GPU runs first, then runs with offline results (the primary view), then
    newest first."""
    keys = method_keys(df["method"])
    metrics = [metric] + [m for m in METRIC_ORDER if m != metric]
    runs = []
    for i, ((run_id, uuid), raw) in enumerate(df.groupby(["run_id", "gpu_uuid"], dropna=False, sort=True)):
        uuid = None if pd.isna(uuid) else uuid
        cpu = is_cpu(raw)
        gpu = "CPU" if cpu else (str(raw["gpu_name"].dropna().iloc[0]) if raw["gpu_name"].notna().any()
                                 else "unknown GPU")
        started = str(raw["measured_at"].min())[:16].replace("T", " ")
        sources = sorted(raw["source"].unique().tolist())
        name = run_name(raw, [paths[s] for s in sources] if paths else [])
        label = f"{name} · {'CPU results' if cpu else gpu} · {started}"
        methods = sorted(raw["method"].unique())
        run = Run(f"r{i}", run_id, uuid, gpu, cpu, name, label, sources, environment(raw), methodology(raw),
                  clock_series(raw), *_excluded(raw), keys={m: keys[m] for m in methods},
                  roles={m: _role(raw, m) for m in methods}, full=is_full_comparison(raw), started=started,
                  last=str(raw["measured_at"].max()))
        for mode in _order(raw["mode"], MODE_ORDER):
            for cache in _order(raw.loc[raw["mode"] == mode, "cache"], CACHE_ORDER):
                sub = raw[(raw["mode"] == mode) & (raw["cache"] == cache)]
                for met in metrics:
                    if sub[METRICS[met]].notna().any():
                        vid = f"{run.id}-{mode}-{cache}-{met}"
                        run.views.append(build_view(vid, sub, mode, cache, met, baseline))
        runs.append((cpu, "offline" not in set(raw["mode"]), run.last, run))
    # GPU before CPU, offline before server-only, newest first
    runs.sort(key=lambda t: (t[0], t[1], [-ord(ch) for ch in t[2]]))
    out = [r[-1] for r in runs]
    for i, r in enumerate(out):  # ids follow the page order
        for v in r.views:
            v.id = v.id.replace(f"{r.id}-", f"r{i}-", 1)
        r.id = f"r{i}"
    return out
