"""Terminal summary of a results file: paired speedups with CIs against a baseline.

The baseline of a (shape, mode, cache) group is ``--baseline`` in its faster layout (best of
layouts, CUDA-L2's "max"), chosen by median device time. A speedup is that baseline's median
over the method's, both from the same group of the same run, with a bootstrap CI over rounds.
Rows that are not rankable (``harness.results.rankable``: failed the gate, could not run, or
came in below the physical floor) are shown with their status and never get a speedup. With
fewer rounds than a 95 % interval needs, a speedup is shown without one, and says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd
from rich.markup import escape

from harness.results import rankable
from harness.timing.stats import Speedup, geomean, paired_speedup


@dataclass
class SpeedupRow:
    shape: str
    mode: str
    cache: str
    method: str
    layout: str
    device_us: float
    host_us: float
    status: str
    speedup: Speedup | None


def compute_speedups(results: pd.DataFrame, samples: pd.DataFrame, baseline: str, metric: str = "device_us",
                     ci: bool = True) -> list[SpeedupRow]:
    """Every row's speedup over the baseline of its group; ``ci=False`` skips the bootstrap intervals
    (about 3 ms a row, half a minute over the grid's 8,000 rows) where only the ratios are shown."""
    col = f"{metric}_median"
    out: list[SpeedupRow] = []
    samp = samples[samples["metric"] == metric] if len(samples) else samples
    by_key = {k: g.sort_values("round")["value"].to_numpy() for k, g in
              samp.groupby(["shape", "mode", "cache", "method", "layout"])} if len(samp) else {}
    # the columns read per row, apart: row access on the full frame (70-odd columns) cost more than the rest
    narrow = pd.DataFrame({c: results[c] for c in ("shape", "mode", "cache", "method", "layout", "status")})
    narrow["value"] = results[col]
    for c in ("device_us_median", "host_us_median"):
        narrow[c] = results[c] if c in results else None
    narrow["ok"] = rankable(results, col)
    for (shape, mode, cache), grp in narrow.groupby(["shape", "mode", "cache"], sort=False):
        base = grp[grp["ok"] & (grp["method"] == baseline)]
        base_s = None
        if len(base):
            base_s = by_key.get((shape, mode, cache, baseline, base["layout"].loc[base["value"].idxmin()]))
        for method, layout, dev, host, status, ok in zip(grp["method"], grp["layout"], grp["device_us_median"],
                                                          grp["host_us_median"], grp["status"], grp["ok"]):
            sp = None
            if base_s is not None and ok:
                ms = by_key.get((shape, mode, cache, method, layout))
                if ms is not None and len(ms):
                    sp = paired_speedup(base_s, ms, paired=(mode == "offline"), ci=ci)
            out.append(SpeedupRow(shape, mode, cache, method, layout, dev, host, status, sp))
    return out


def geomean_by_method(rows: list[SpeedupRow]) -> pd.DataFrame:
    """Per (mode, cache, method): geomean of best-of-layouts speedups, wins, shapes covered."""
    best: dict[tuple, float] = {}
    for r in rows:
        if r.speedup is None or not math.isfinite(r.speedup.ratio):
            continue
        key = (r.mode, r.cache, r.method, r.shape)
        best[key] = max(best.get(key, 0.0), r.speedup.ratio)
    recs = {}
    for (mode, cache, method, _shape), v in best.items():
        recs.setdefault((mode, cache, method), []).append(v)
    data = [
        {"mode": k[0], "cache": k[1], "method": k[2], "shapes": len(v),
         "geomean": geomean(v), "wins": int(sum(x > 1.0 for x in v)),
         "worst": float(min(v)), "best": float(max(v))}
        for k, v in recs.items()
    ]
    return (pd.DataFrame(data).sort_values(["mode", "cache", "geomean"], ascending=[True, True, False])
            if data else pd.DataFrame())


def print_summary(results: pd.DataFrame, samples: pd.DataFrame, baseline: str, console,
                  per_shape_limit: int = 24) -> None:
    from rich.table import Table

    if results.empty:
        console.print("[yellow]no results[/]")
        return
    device = results["device"].iloc[0]
    if device == "cpu":
        console.print("[bold yellow]CPU results[/]: measured on the CPU with torch CPU methods; not GPU numbers.")
    shapes = list(dict.fromkeys(results["shape"]))
    per_shape = len(shapes) <= per_shape_limit  # the per-row table with intervals; else geomeans alone
    rows = compute_speedups(results, samples, baseline, ci=per_shape)
    if per_shape:
        for (mode, cache) in dict.fromkeys((r.mode, r.cache) for r in rows):
            t = Table(title=f"{mode} / {cache} cache: device time per call; speedup vs {baseline} (best layout)")
            for c in ("shape", "method", "layout", "device us", "host us", "speedup [95% CI]", "status"):
                t.add_column(c, justify="right" if c in ("device us", "host us") else "left")
            for r in rows:
                if r.mode != mode or r.cache != cache or r.status == "unsupported":
                    continue  # unsupported rows are counted once below, not listed per shape
                sp = _fmt_speedup(r.speedup)
                t.add_row(r.shape, r.method, r.layout, _fmt(r.device_us), _fmt(r.host_us), sp,
                          r.status if r.status == "ok" else f"[red]{r.status}[/]")
            console.print(t)
    g = geomean_by_method(rows)
    if not g.empty:
        t = Table(title=f"geomean speedup vs {baseline} (best of layouts per method and shape)")
        for c in ("mode", "cache", "method", "shapes", "geomean", "wins", "worst", "best"):
            t.add_column(c)
        for _, r in g.iterrows():
            t.add_row(r["mode"], r["cache"], r["method"], str(r["shapes"]), f"{r['geomean']:.3f}", str(r["wins"]),
                      f"{r['worst']:.3f}", f"{r['best']:.3f}")
        console.print(t)
    _print_warnings(results, console)
    bad = results[results["status"] != "ok"]
    if len(bad):
        counts = bad.groupby(["status", "method"]).size()
        console.print("[bold]not ranked:[/] " + escape(", ".join(f"{m} {s} x{n}" for (s, m), n in counts.items())))
        reasons = bad[bad["status"].isin(["gate_failed", "error"])].drop_duplicates(["method", "status_reason"]).head(8)
        for _, r in reasons.iterrows():
            console.print(f"  [red]{escape(str(r['method']))}[/] {r['layout']} {r['shape']}: "
                          f"{escape(str(r['status_reason']))}")


def _fmt_speedup(s: Speedup | None) -> str:
    if s is None:
        return "-"
    if math.isnan(s.lo):
        return f"{s.ratio:.3f} (no CI: {s.n_pairs} rounds)"
    return f"{s.ratio:.3f} [{s.lo:.3f}, {s.hi:.3f}]"


def _fmt(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def row_warnings(results: pd.DataFrame) -> dict[tuple[str, str], int]:
    """(method, warning) -> rows: the ``warnings`` a method put in its rows' ``info`` (a condition of
    this run that changes what the row measures, e.g. a kernel the host could not build)."""
    out: dict[tuple[str, str], int] = {}
    if "info" not in results:
        return out
    for method, info in zip(results["method"], results["info"]):
        try:
            warnings = json.loads(info or "{}").get("warnings") or []
        except (TypeError, ValueError):
            continue
        for w in warnings:
            out[(method, str(w))] = out.get((method, str(w)), 0) + 1
    return out


def _print_warnings(results: pd.DataFrame, console) -> None:
    for (method, text), n in sorted(row_warnings(results).items(), key=lambda kv: -kv[1])[:8]:
        console.print(f"[bold yellow]warning[/] {escape(str(method))}: {escape(str(text))} "
                      f"({n} row{'s' if n > 1 else ''})")
