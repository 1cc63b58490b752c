"""The report's plots, each a function from a view's rows to one inline SVG string.

Plots use best-of-layouts rows (one point per method and shape) so that a reader compares
methods, not layouts; per-layout numbers are in the tables. Every mark's tooltip names the shape,
the method by its short key (``reports.keys``: the full spec is in the legend's and the
leaderboard's hover text and rows, once per method, not on each of thousands of marks) and the
value. A method's marks share one ``<g>`` for their colour. The views' scatter marks are written
as (x, y, table row) data (``Chart.table_marks``); report.js draws them and writes that text
from the row, as ``_tip`` does for the heatmap cells.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.timing.stats import geomean
from reports.derive import BEST, metric_column
from reports.svg import Chart, Scale, diverging, esc, padded

SPAN_LOG2 = 1.0  # colour saturates at 2x faster / 2x slower
COLORBAR_STEPS = 11  # odd, so the middle step is the "equal" grey
MAX_DOTS = 300  # per method in the distribution plot; beyond it only the outer 10% are dots
MAX_CLOCK_BINS = 60  # per panel of the clocks plot; longer runs are summarised in bins of rows


def _flops(d: pd.DataFrame) -> pd.Series:
    return 2.0 * d["m"] * d["n"] * d["k"]


def _min_bytes(d: pd.DataFrame) -> pd.Series:
    return 2.0 * (d["m"] * d["k"] + d["k"] * d["n"] + d["m"] * d["n"])


def _tip(r, metric_col: str, keys: dict[str, str]) -> str:
    """Hover text of one heatmap cell: method key, shape, winning layout, time and speedup, to 4
    significant digits as the table data holds them. report.js's markTip writes the same text
    from a table row for each scatter mark (``Chart.table_marks``)."""
    key = keys.get(r["method"], r["method"])
    return (f"{key}\nM={r['m']} N={r['n']} K={r['k']} ({r['best_of']})\n{r[metric_col]:.4g} us\n"
            f"speedup {r['speedup']:.4g}x")


def _best(sp: pd.DataFrame) -> pd.DataFrame:
    return sp[sp["layout"] == BEST]


def _legend(c: Chart, methods, colors: dict[str, str], keys: dict[str, str], specs: bool = True) -> None:
    """One legend entry per method: its key, with the full spec as the entry's hover text unless
    ``specs`` is false (charts shown below the speedup-vs-size chart of the same view, whose
    legend already carries them)."""
    c.legend([(keys.get(m, m), colors.get(m, "#888"), m if specs else "") for m in methods])


def _by_method(d: pd.DataFrame, *cols):
    """(method, rows, extra columns...) per method, so each method's marks go into one group."""
    meth = d["method"].to_numpy()
    recs = d.to_dict("records")
    arrs = [np.asarray(c) for c in cols]
    for m in sorted(set(meth)):
        pos = np.flatnonzero(meth == m)
        yield (m, [recs[i] for i in pos], *[a[pos] for a in arrs])


def _empty(title: str, msg: str, kind: str) -> str:
    c = Chart(height=120, title=title, kind=kind)
    c.text(c.w / 2, 60, msg, anchor="middle", cls="label")
    return c.render()


def speedup_vs_size(sp: pd.DataFrame, baseline: str | None, colors: dict[str, str], keys: dict[str, str]) -> str:
    """Log-log scatter: speedup over the baseline against problem FLOPs, one colour per method."""
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
    for m, rows, fm in _by_method(d, f):
        c.table_marks([(xs(fl), ys(r["speedup"]), r["row"]) for r, fl in zip(rows, fm)], colors.get(m, "#888"))
    _legend(c, sorted(d["method"].unique()), colors, keys)
    return c.render()


def throughput_vs_size(sp: pd.DataFrame, metric: str, colors: dict[str, str], keys: dict[str, str]) -> str:
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
    for m, rows, fm, tfm in _by_method(d, f, tf):
        c.table_marks([(xs(fl), ys(t), r["row"]) for r, fl, t in zip(rows, fm, tfm)], colors.get(m, "#888"),
                      tip="tflops")
    _legend(c, sorted(d["method"].unique()), colors, keys, specs=False)
    return c.render()


def speedup_distribution(sp: pd.DataFrame, baseline: str | None, colors: dict[str, str],
                         keys: dict[str, str]) -> str:
    """Per method: every shape's speedup as a dot, with a box over the 25-75th percentiles and the
    geometric mean marked, on one log axis, so spread and outliers are visible, not just the mean.
    The baseline's row is its geometric-mean tick at 1x only (every one of its speedups is 1)."""
    d = _best(sp)
    d = d[d["speedup"].notna()]
    title = f"Distribution of per-shape speedups over {baseline}"
    if d.empty:
        return _empty(title, "no paired speedups in this view", "speedup-dist")
    methods = list(d.groupby("method")["speedup"].apply(geomean)
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
        k = keys.get(m, m)
        q1, q3 = np.quantile(g["speedup"], [0.25, 0.75])
        p5, p95 = np.quantile(g["speedup"], [0.05, 0.95])
        c.rect(xs(q1), yc - 9, xs(q3) - xs(q1), 18, color, f"{k}: middle half of shapes {q1:.3f}x - {q3:.3f}x",
               cls="box")
        gm = geomean(g["speedup"])
        what = (f"the baseline itself: 1x on each of its {len(g)} shapes by definition" if m == baseline
                else f"geometric mean {gm:.3f}x over {len(g)} shapes")
        c.parts.append(f'<line class="gm" x1="{xs(gm):.1f}" x2="{xs(gm):.1f}" y1="{yc - 12:.1f}" y2="{yc + 12:.1f}">'
                       f'<title>{esc(k)}: {what}</title></line>')
        pts = g
        if m == baseline:  # its per-shape speedups are all exactly 1: a dot per shape would say nothing
            pts = g.iloc[:0]
        elif len(g) > MAX_DOTS:  # many shapes: whisker 5th-95th percentile, dots only outside it
            c.parts.append(f'<line class="whisker" x1="{xs(p5):.1f}" x2="{xs(p95):.1f}" y1="{yc:.1f}" y2="{yc:.1f}" '
                           f'stroke="{color}"><title>{esc(k)}: 90% of shapes {p5:.3f}x - {p95:.3f}x</title></line>')
            pts = g[(g["speedup"] < p5) | (g["speedup"] > p95)]
        c.table_marks([(xs(r["speedup"]), yc + rng.uniform(-7, 7), r["row"]) for r in pts.to_dict("records")],
                      color, r=3)
        c.text(c.x0 - 8, yc + 4, k, anchor="end", cls="label", title=m if k != m else "")
    return c.render()


def _grid_like(d: pd.DataFrame) -> bool:
    """Heatmaps per K only pay off when each K slice has a real M x N grid of shapes."""
    per_k = d.groupby("k")["shape"].nunique()
    return len(per_k) <= 12 and per_k.min() >= 4 and per_k.mean() >= 0.5 * d["m"].nunique() * d["n"].nunique()


def speedup_maps(sp: pd.DataFrame, methods: list[str], metric: str, keys: dict[str, str]) -> str:
    """Each method's speedup over the (M, N, K) grid, coloured blue (faster) to red (slower).

    One chart per view with a layer per method (``<g class="layer" data-key=...>``, by method
    key; the page's select shows one, the first without script). The layers share the axes, so
    a shape sits at the same place for every method, and the frame, axes and colour key are
    written once per view, not once per method (per-method charts would repeat them hundreds of
    times). A grid shape set gets one M x N heatmap panel per K; any other set a log-log map of
    M·N against K with each shape a coloured dot.
    """
    col = metric_column(metric)
    d = _best(sp)
    d = d[d["method"].isin(methods) & d["speedup"].notna()]
    title = "Speedup over the shape grid, one method at a time"
    if d.empty:
        return _empty(title, "no paired speedups in this view", "speedup-map")
    layers = [(m, d[d["method"] == m]) for m in methods]
    if _grid_like(d):
        return _heatmaps(d, layers, col, title, keys)
    c = Chart(title=title, kind="speedup-map", height=360)
    mn = d["m"] * d["n"]
    xs = c.xscale(*padded(mn.min(), mn.max(), True, 0.08), log=True)
    ys = c.yscale(*padded(d["k"].min(), d["k"].max(), True, 0.08), log=True)
    c.axes(xs, ys, "output size M·N (log)", "K (log)")
    _colorbar(c)
    for i, (m, g) in enumerate(layers):
        _open_layer(c, i, m, keys, c.x0, 15)
        c.table_marks([(xs(r["m"] * r["n"]), ys(r["k"]), r["row"], diverging(math.log2(r["speedup"]), SPAN_LOG2))
                       for r in g.to_dict("records")], r=7, cls="pt dot")
        c.parts.append("</g>")
    return c.render()


def _open_layer(c: Chart, i: int, method: str, keys: dict[str, str], x: float, y: float) -> None:
    """Start one method's layer (only the first is displayed) with its key as a visible label."""
    k = keys.get(method, method)
    c.parts.append(f'<g class="layer" data-key="{esc(k)}"' + (' display="none">' if i else ">"))
    c.text(x, y, k, cls="label", title=method if k != method else "")


def _colorbar(c: Chart) -> None:
    """The colour key, in COLORBAR_STEPS steps from 2x slower to 2x faster (each map carries its
    own key; 40 thin steps looked no different and cost 3 kB per map)."""
    x, w = c.w - 236, 200
    step = w / COLORBAR_STEPS
    cells = "".join(f'<rect x="{x + i * step:.1f}" y="6" width="{step + 0.5:.1f}" height="10" '
                    f'fill="{diverging(-SPAN_LOG2 + 2 * SPAN_LOG2 * (i + 0.5) / COLORBAR_STEPS, SPAN_LOG2)}"/>'
                    for i in range(COLORBAR_STEPS))
    c.parts.append(f'<g class="cbar">{cells}</g>')
    c.text(x - 4, 15, f"{2 ** -SPAN_LOG2:g}x slower", anchor="end", cls="tick")
    c.text(x + w + 4, 15, f"{2 ** SPAN_LOG2:g}x", cls="tick")
    c.text(x + w / 2, 28, "1x", anchor="middle", cls="tick")


def _heatmaps(d: pd.DataFrame, layers, col: str, title: str, keys: dict[str, str]) -> str:
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
    where = {}
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
                where[(m, n, k)] = (ox + b * cell, y)
                # under every layer: a method's own cell covers it where it has a result
                c.rect(ox + b * cell, y, cell - 1, cell - 1, "#ffffff",
                       f"M={m} N={n} K={k}: no paired result for this method", cls="cell na")
    for i, (method, g) in enumerate(layers):
        _open_layer(c, i, method, keys, 4, 32)
        for r in g.to_dict("records"):
            x, y = where[(r["m"], r["n"], r["k"])]
            c.rect(x, y, cell - 1, cell - 1, diverging(math.log2(r["speedup"]), SPAN_LOG2), _tip(r, col, keys))
        c.parts.append("</g>")
    return c.render()


def _short(v: int) -> str:
    return f"{v // 1024}k" if v >= 1024 and v % 1024 == 0 else str(v)


def roofline_efficiency(sp: pd.DataFrame, metric: str, colors: dict[str, str], keys: dict[str, str]) -> str:
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
    for m, rows, em, am in _by_method(d, eff, ai):
        c.table_marks([(xs(a), ys(e), r["row"]) for r, e, a in zip(rows, em, am)], colors.get(m, "#888"),
                      tip="efficiency")
    _legend(c, sorted(d["method"].unique()), colors, keys, specs=False)
    return c.render()


def clocks_through_run(raw: pd.DataFrame, colors_by_view: dict[str, str], keys: dict[str, str]) -> str:
    """SM clock and power of every measured row in measurement order, coloured by mode/cache,
    so throttling or a clock drop during the run is visible at a glance.

    A run of up to MAX_CLOCK_BINS rows gets a dot per row (hover: time, method key, shape,
    reading). A longer run is summarised in at most MAX_CLOCK_BINS bins of consecutive rows per
    panel, so the chart stays a few tens of kB however long the run: each bin is a dot at its
    mean and a vertical line from its min to its max (a dip inside a bin stays visible), its
    hover gives the rows, time span, mean, min, max and throttled rows, and the axis label says
    how many rows a bin holds. Every row's own numbers are in the results file and the tables.
    """
    d = raw.sort_values("measured_at", kind="stable").reset_index(drop=True)
    d["order"] = np.arange(len(d))
    d["key"] = d["mode"] + "/" + d["cache"]
    title = "SM clock and power through the run"
    if d["sm_clock_mhz_mean"].notna().sum() + d["power_w_mean"].notna().sum() == 0:
        return _empty(title, "no clock or power readings in this run (CPU run, or NVML absent)", "clocks")
    binsize = max(1, math.ceil(len(d) / MAX_CLOCK_BINS))
    d["bin"] = d["order"] // binsize
    days = {str(t)[:10] for t in d["measured_at"]}
    # measured_at: a timestamp ("2026-11-30 10:00:05+00:00"), or an ISO string in hand-made frames
    one_day = len(days) == 1 and all(len(str(t)) >= 19 and str(t)[10] in "T " for t in d["measured_at"])
    d["when"] = [str(t)[11:19] if one_day else str(t) for t in d["measured_at"]]  # time of day if one date
    c = Chart(width=1100, height=420, title=title, kind="clocks", left=72, right=24)
    xs = c.xscale(0, max(len(d) - 1, 1))
    mid = (c.y0 + c.y1) / 2
    panels = [("sm_clock_mhz_mean", "SM clock (MHz)", c.y0, mid + 20), ("power_w_mean", "power (W)", mid - 20, c.y1)]
    xlabel = f"{len(d)} rows in measurement order (measured_at" + (f", {days.pop()}" if one_day else "") + ")"
    if binsize > 1:
        xlabel += f"; downsampled: dot = mean of up to {binsize} consecutive rows, line = their min to max"
    c.axes(None, None, xlabel)
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
            for key, g in ok.groupby("key", sort=True):
                c.points([(xs(r["order"]), ys(r[colname]),
                           f"{r['when']}\n{keys.get(r['method'], r['method'])} ({r['layout']}) "
                           f"M={r['m']} N={r['n']} K={r['k']}\n{key}\n{name}: {r[colname]:.4g}"
                           + ("\nTHROTTLED" if r.get("throttled") is True else "")) for r in g.to_dict("records")],
                         colors_by_view.get(key, "#888"), r=2.5)
            continue
        agg = ok.groupby(["key", "bin"]).agg(
            x=("order", "mean"), first=("order", "min"), last=("order", "max"), mean=(colname, "mean"),
            lo=(colname, "min"), hi=(colname, "max"), t0=("when", "min"), t1=("when", "max"),
            n=(colname, "size"), thr=("throttled", lambda s: int(s.fillna(False).astype(bool).sum())))
        for key, g in agg.groupby(level="key", sort=True):
            color = colors_by_view.get(key, "#888")
            spans = "".join(f"M{xs(r['x']):.1f} {ys(r['lo']):.1f}V{ys(r['hi']):.1f}"
                            for r in g.to_dict("records") if r["hi"] > r["lo"])
            if spans:
                c.parts.append(f'<path class="range" d="{spans}" stroke="{color}"/>')
            c.points([(xs(r["x"]), ys(r["mean"]),
                       f"rows {r['first'] + 1}-{r['last'] + 1} of {len(d)}, "
                       + (f"{r['t0']}" if r["t0"] == r["t1"] else f"{r['t0']}-{r['t1']}") + f"\n{key}: {r['n']} rows\n"
                       f"{name}: mean {r['mean']:.4g} (min {r['lo']:.4g}, max {r['hi']:.4g})"
                       + (f"\n{r['thr']} rows THROTTLED" if r["thr"] else "")) for r in g.to_dict("records")],
                     color, r=2.5)
    c.legend(sorted(colors_by_view.items()))
    return c.render()
