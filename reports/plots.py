"""The report's plots, each a function from a view's rows to one inline SVG string.

Plots use best-of-layouts rows (one point per method and shape) so that a reader compares
methods, not layouts; per-layout numbers are in the tables. Every mark's tooltip names the shape.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from reports.derive import BEST, metric_column
from reports.svg import Chart, Scale, diverging, padded

SPAN_LOG2 = 1.0  # colour saturates at 2x faster / 2x slower
MAX_DOTS = 300  # per method in the distribution plot; beyond it only the outer 10% are dots
MAX_CLOCK_POINTS = 1500  # per series in the clocks plot; beyond it rows are averaged in bins


def _flops(d: pd.DataFrame) -> pd.Series:
    return 2.0 * d["m"] * d["n"] * d["k"]


def _min_bytes(d: pd.DataFrame) -> pd.Series:
    return 2.0 * (d["m"] * d["k"] + d["k"] * d["n"] + d["m"] * d["n"])


def _tip(r, metric_col: str, extra: str = "") -> str:
    t = f"{r['label']}\nM={r['m']} N={r['n']} K={r['k']} ({r['best_of']})\n{r[metric_col]:.4g} us"
    if not pd.isna(r.get("speedup")):
        t += f"\nspeedup {r['speedup']:.3f}x"
    return t + (f"\n{extra}" if extra else "")


def _best(sp: pd.DataFrame) -> pd.DataFrame:
    return sp[sp["layout"] == BEST]


def _empty(title: str, msg: str, kind: str) -> str:
    c = Chart(height=120, title=title, kind=kind)
    c.text(c.w / 2, 60, msg, anchor="middle", cls="label")
    return c.render()


def speedup_vs_size(sp: pd.DataFrame, baseline: str | None, metric: str, colors: dict[str, str]) -> str:
    """Log-log scatter: speedup over the baseline against problem FLOPs, one colour per method."""
    col = metric_column(metric)
    d = _best(sp)
    d = d[d["speedup"].notna() & (d["method"] != baseline)]
    title = f"Speedup over {baseline} vs problem size"
    if d.empty:
        return _empty(title, "no paired speedups in this view", "speedup-size")
    c = Chart(title=title, kind="speedup-size")
    f = _flops(d)
    xs = c.xscale(*padded(f.min(), f.max(), True), log=True)
    lo, hi = min(d["speedup"].min(), 0.9), max(d["speedup"].max(), 1.1)
    ys = c.yscale(*padded(lo, hi, True), log=True)
    c.axes(xs, ys, "problem size: 2·M·N·K FLOP (log)", f"speedup over {baseline} (log)")
    c.hline(ys(1.0), text=f"= {baseline}")
    methods = sorted(d["method"].unique())
    for r, fl in zip(d.to_dict("records"), f):
        c.point(xs(fl), ys(r["speedup"]), colors.get(r["method"], "#888"), _tip(r, col))
    c.legend([(m, colors.get(m, "#888")) for m in methods])
    return c.render()


def throughput_vs_size(sp: pd.DataFrame, metric: str, colors: dict[str, str]) -> str:
    """Log-log scatter: achieved TFLOP/s against problem FLOPs, every method including the baseline
    (absolute numbers of one run on one machine; compare methods within it, not across runs)."""
    col = metric_column(metric)
    d = _best(sp)
    d = d[d[col] > 0]
    title = "Throughput vs problem size"
    if d.empty:
        return _empty(title, "no rankable rows in this view", "throughput")
    f = _flops(d)
    tf = f / (d[col] * 1e-6) / 1e12
    c = Chart(title=title, kind="throughput")
    xs = c.xscale(*padded(f.min(), f.max(), True), log=True)
    ys = c.yscale(*padded(tf.min(), tf.max(), True), log=True)
    c.axes(xs, ys, "problem size: 2·M·N·K FLOP (log)", "TFLOP/s (log)")
    for r, fl, t in zip(d.to_dict("records"), f, tf):
        c.point(xs(fl), ys(t), colors.get(r["method"], "#888"), _tip(r, col, f"{t:.3g} TFLOP/s"))
    c.legend([(m, colors.get(m, "#888")) for m in sorted(d["method"].unique())])
    return c.render()


def speedup_distribution(sp: pd.DataFrame, baseline: str | None, metric: str, colors: dict[str, str]) -> str:
    """Per method: every shape's speedup as a dot, with a box over the 25-75th percentiles and the
    geometric mean marked, on one log axis, so spread and outliers are visible, not just the mean."""
    col = metric_column(metric)
    d = _best(sp)
    d = d[d["speedup"].notna()]
    title = f"Distribution of per-shape speedups over {baseline}"
    if d.empty:
        return _empty(title, "no paired speedups in this view", "speedup-dist")
    methods = list(d.groupby("method")["speedup"].apply(lambda s: np.exp(np.log(s).mean()))
                   .sort_values(ascending=False).index)
    row_h = 34
    c = Chart(height=60 + 48 + row_h * len(methods), left=190, title=title, kind="speedup-dist")
    lo, hi = min(d["speedup"].min(), 0.9), max(d["speedup"].max(), 1.1)
    xs = c.xscale(*padded(lo, hi, True), log=True)
    c.axes(xs, None, f"speedup over {baseline} (log; right of the line = faster)")
    x1 = xs(1.0)
    c.parts.append(f'<line class="ref" x1="{x1:.1f}" x2="{x1:.1f}" y1="{c.y1}" y2="{c.y0}"/>')
    rng = np.random.default_rng(0)
    for i, m in enumerate(methods):
        g = d[d["method"] == m]
        yc = c.y1 + row_h * (i + 0.5) + 6
        color = colors.get(m, "#888")
        q1, q3 = np.quantile(g["speedup"], [0.25, 0.75])
        p5, p95 = np.quantile(g["speedup"], [0.05, 0.95])
        c.rect(xs(q1), yc - 9, xs(q3) - xs(q1), 18, color, f"{m}: middle half of shapes {q1:.3f}x - {q3:.3f}x",
               cls="box")
        gm = float(np.exp(np.log(g["speedup"]).mean()))
        c.parts.append(f'<line class="gm" x1="{xs(gm):.1f}" x2="{xs(gm):.1f}" y1="{yc - 12:.1f}" y2="{yc + 12:.1f}">'
                       f'<title>{m}: geometric mean {gm:.3f}x</title></line>')
        pts = g
        if len(g) > MAX_DOTS:  # many shapes: whisker 5th-95th percentile, dots only outside it
            c.parts.append(f'<line class="whisker" x1="{xs(p5):.1f}" x2="{xs(p95):.1f}" y1="{yc:.1f}" y2="{yc:.1f}" '
                           f'stroke="{color}"><title>{m}: 90% of shapes {p5:.3f}x - {p95:.3f}x</title></line>')
            pts = g[(g["speedup"] < p5) | (g["speedup"] > p95)]
        for r in pts.to_dict("records"):
            c.point(xs(r["speedup"]), yc + rng.uniform(-7, 7), color, _tip(r, col), r=3)
        c.text(c.x0 - 8, yc + 4, f"{m}", anchor="end", cls="label")
    return c.render()


def _grid_like(d: pd.DataFrame) -> bool:
    """Heatmaps per K only pay off when each K slice has a real M x N grid of shapes."""
    per_k = d.groupby("k")["shape"].nunique()
    return len(per_k) <= 12 and per_k.min() >= 4 and per_k.mean() >= 0.5 * d["m"].nunique() * d["n"].nunique()


def speedup_map(sp: pd.DataFrame, method: str, metric: str) -> str:
    """One method's speedup over the (M, N, K) grid, coloured blue (faster) to red (slower).

    A grid shape set gets one M x N heatmap per K; any other set a log-log map of M·N against
    K with each shape a coloured dot.
    """
    col = metric_column(metric)
    d = _best(sp)
    d = d[(d["method"] == method) & d["speedup"].notna()]
    title = f"{method}: speedup over the shape grid"
    if d.empty:
        return _empty(title, "no paired speedups for this method", "speedup-map")
    if _grid_like(d):
        return _heatmaps(d, method, col, title)
    c = Chart(title=title, kind="speedup-map", height=360)
    mn = d["m"] * d["n"]
    xs = c.xscale(*padded(mn.min(), mn.max(), True, 0.08), log=True)
    ys = c.yscale(*padded(d["k"].min(), d["k"].max(), True, 0.08), log=True)
    c.axes(xs, ys, "output size M·N (log)", "K (log)")
    for r, v in zip(d.to_dict("records"), mn):
        c.point(xs(v), ys(r["k"]), diverging(math.log2(r["speedup"]), SPAN_LOG2), _tip(r, col), r=7, cls="pt dot")
    _colorbar(c)
    return c.render()


def _colorbar(c: Chart) -> None:
    x, w = c.w - 236, 200
    for i in range(40):
        v = -SPAN_LOG2 + 2 * SPAN_LOG2 * (i + 0.5) / 40
        c.rect(x + i * w / 40, 6, w / 40 + 0.5, 10, diverging(v, SPAN_LOG2), cls="cbar")
    c.text(x - 4, 15, f"{2 ** -SPAN_LOG2:g}x slower", anchor="end", cls="tick")
    c.text(x + w + 4, 15, f"{2 ** SPAN_LOG2:g}x", cls="tick")
    c.text(x + w / 2, 28, "1x", anchor="middle", cls="tick")


def _heatmaps(d: pd.DataFrame, method: str, col: str, title: str) -> str:
    ks = sorted(d["k"].unique())
    ms = sorted(d["m"].unique())
    ns = sorted(d["n"].unique())
    cell = max(12, min(34, 260 // max(len(ms), len(ns))))
    lab = 36  # room for the M labels left of each panel
    pw, ph = lab + cell * len(ns) + 20, cell * len(ms) + 58
    per_row = max(1, 1300 // pw)
    rows = math.ceil(len(ks) / per_row)
    c = Chart(width=max(per_row * pw, 420) + 10, height=rows * ph + 44, left=0, right=0, top=40, bottom=0,
              title=title, kind="speedup-map")
    _colorbar(c)
    c.text(4, 15, "rows: M, columns: N; one panel per K", cls="label")
    cells = {(r["m"], r["n"], r["k"]): r for r in d.to_dict("records")}
    for i, k in enumerate(ks):
        ox = lab + (i % per_row) * pw
        oy = 44 + (i // per_row) * ph
        c.text(ox, oy + 10, f"K = {k}", cls="label")
        for b, n in enumerate(ns):
            c.text(ox + b * cell + cell / 2, oy + 26, _short(n), anchor="middle", cls="tick")
        for a, m in enumerate(ms):
            y = oy + 32 + a * cell
            c.text(ox - 4, y + cell / 2 + 3, _short(m), anchor="end", cls="tick")
            for b, n in enumerate(ns):
                x = ox + b * cell
                r = cells.get((m, n, k))
                if r is not None:
                    c.rect(x, y, cell - 1, cell - 1, diverging(math.log2(r["speedup"]), SPAN_LOG2), _tip(r, col))
                else:
                    c.rect(x, y, cell - 1, cell - 1, "#ffffff", f"M={m} N={n} K={k}: no paired result", cls="cell na")
    return c.render()


def _short(v: int) -> str:
    return f"{v // 1024}k" if v >= 1024 and v % 1024 == 0 else str(v)


def roofline_efficiency(sp: pd.DataFrame, metric: str, colors: dict[str, str]) -> str:
    """Fraction of the physical floor reached (floor_us / measured) against arithmetic intensity."""
    col = metric_column(metric)
    d = _best(sp)
    d = d[d["floor_us"].notna() & (d[col] > 0)]
    title = "Roofline efficiency: physical floor / measured time"
    if d.empty:
        return _empty(title, "no rows with a physical floor in this view", "roofline")
    eff = d["floor_us"] / d[col]
    ai = _flops(d) / _min_bytes(d)
    c = Chart(title=title, kind="roofline")
    xs = c.xscale(*padded(ai.min(), ai.max(), True), log=True)
    ys = c.yscale(*padded(max(eff.min(), 1e-4), max(eff.max(), 1.0), True), log=True)
    c.axes(xs, ys, "arithmetic intensity: FLOP per minimum byte moved (log)", "efficiency (log; 1 = at the floor)")
    c.hline(ys(1.0), text="physical floor")
    for r, e, a in zip(d.to_dict("records"), eff, ai):
        c.point(xs(a), ys(e), colors.get(r["method"], "#888"), _tip(r, col, f"efficiency {e:.1%}"))
    c.legend([(m, colors.get(m, "#888")) for m in sorted(d["method"].unique())])
    return c.render()


def clocks_through_run(raw: pd.DataFrame, colors_by_view: dict[str, str]) -> str:
    """SM clock and power of every measured row in measurement order, coloured by mode/cache,
    so throttling or a clock drop during the run is visible at a glance. Long runs are averaged
    over bins of consecutive rows (the tooltip gives the bin's range, mean, min and max)."""
    d = raw.sort_values("measured_at", kind="stable").reset_index(drop=True)
    d["order"] = np.arange(len(d))
    d["key"] = d["mode"] + "/" + d["cache"]
    title = "SM clock and power through the run"
    if d["sm_clock_mhz_mean"].notna().sum() + d["power_w_mean"].notna().sum() == 0:
        return _empty(title, "no clock or power readings in this run (CPU run, or NVML absent)", "clocks")
    binsize = max(1, math.ceil(len(d) / MAX_CLOCK_POINTS))
    c = Chart(width=1100, height=420, title=title, kind="clocks", left=72, right=24)
    xs = c.xscale(0, max(len(d) - 1, 1))
    mid = (c.y0 + c.y1) / 2
    panels = [("sm_clock_mhz_mean", "SM clock (MHz)", c.y0, mid + 20), ("power_w_mean", "power (W)", mid - 20, c.y1)]
    c.axes(None, None, "rows in measurement order (measured_at)" + (f"; means over {binsize} rows" if binsize > 1 else ""))
    for colname, name, py0, py1 in panels:
        v = d[colname]
        if v.notna().sum() == 0:
            continue
        lo, hi = padded(v.min(), v.max(), False)
        ys = Scale(lo, hi, py0, py1)
        for t in ys.ticks(3):
            c.parts.append(f'<line class="grid" x1="{c.x0}" x2="{c.x1}" y1="{ys(t):.1f}" y2="{ys(t):.1f}"/>')
            c.text(c.x0 - 6, ys(t) + 4, f"{t:g}", anchor="end")
        cy = (py0 + py1) / 2
        c.parts.append(f'<text class="label" transform="translate(16 {cy:.0f}) rotate(-90)" '
                       f'text-anchor="middle">{name}</text>')
        ok = d[d[colname].notna()]
        if binsize == 1:
            for r in ok.to_dict("records"):
                tip = (f"{r['measured_at']}\n{r['method']} ({r['layout']}) M={r['m']} N={r['n']} K={r['k']}\n"
                       f"{r['key']}\n{name}: {r[colname]:.4g}" + ("\nTHROTTLED" if r.get("throttled") is True else ""))
                c.point(xs(r["order"]), ys(r[colname]), colors_by_view.get(r["key"], "#888"), tip, r=2.5)
            continue
        agg = ok.groupby([ok["order"] // binsize, "key"]).agg(
            x=("order", "mean"), mean=(colname, "mean"), lo=(colname, "min"), hi=(colname, "max"),
            t0=("measured_at", "min"), t1=("measured_at", "max"), n=(colname, "size"),
            thr=("throttled", lambda s: int(s.fillna(False).astype(bool).sum())))
        for (b, key), r in agg.iterrows():
            tip = (f"{r['t0']} - {r['t1']}\n{key}: {r['n']} rows\n{name}: mean {r['mean']:.4g} "
                   f"(min {r['lo']:.4g}, max {r['hi']:.4g})" + (f"\n{r['thr']} rows THROTTLED" if r["thr"] else ""))
            c.point(xs(r["x"]), ys(r["mean"]), colors_by_view.get(key, "#888"), tip, r=2.5)
    c.legend(sorted(colors_by_view.items()))
    return c.render()
