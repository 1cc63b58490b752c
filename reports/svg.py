"""A tiny inline-SVG chart kit: scales, axes, marks with hover titles, legends.

The site must open offline with nothing fetched, so charts are plain SVG strings built here;
hover text is a native ``<title>`` on each mark (the browser shows it as a tooltip). Frames,
axes, legends and summaries are written as SVG. The data marks of the views' plots (about
150,000 on a site of 38 runs) are written as data (``Chart.table_marks``) that the shipped
report.js turns into ``<circle>``s with their ``<title>``s on page load: as SVG they were two
thirds of the page. Only what the report's plots need is implemented.
"""

from __future__ import annotations

import math
from html import escape

# Tableau-10: distinguishable, colour-blind-tolerant categorical palette.
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


def esc(text) -> str:
    return escape(str(text), quote=True)


def fmt(v: float) -> str:
    """Short tick label: 3 significant digits, k/M suffixes for big numbers."""
    if v == 0:
        return "0"
    a = abs(v)
    for div, suf in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


class Scale:
    """Maps a data domain onto a pixel range, linearly or logarithmically."""

    def __init__(self, lo: float, hi: float, px_lo: float, px_hi: float, log: bool = False):
        if log:
            lo, hi = max(lo, 1e-300), max(hi, 1e-300)
        if hi <= lo:
            lo, hi = (lo / 2, lo * 2) if log else (lo - 1, hi + 1)
        self.lo, self.hi, self.px_lo, self.px_hi, self.log = lo, hi, px_lo, px_hi, log

    def _t(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def __call__(self, v: float) -> float:
        if self.log:
            v = max(v, 1e-300)
        f = (self._t(v) - self._t(self.lo)) / (self._t(self.hi) - self._t(self.lo))
        return self.px_lo + f * (self.px_hi - self.px_lo)

    def ticks(self, n: int = 5) -> list[float]:
        if self.log:
            a, b = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
            decades = [10.0**e for e in range(a, b + 1)]
            ticks: list[float] = []
            # the coarsest mantissa set that still gives a few ticks (narrow ranges need more)
            for mant in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
                ticks = [d * m for d in decades for m in mant if self.lo * 0.999 <= d * m <= self.hi * 1.001]
                if len(ticks) >= 3:
                    break
            return ticks
        step = _nice((self.hi - self.lo) / max(n, 1))
        t = math.ceil(self.lo / step) * step
        out = []
        while t <= self.hi + 1e-9 * step:
            out.append(round(t, 12))
            t += step
        return out


def _nice(x: float) -> float:
    e = math.floor(math.log10(x)) if x > 0 else 0
    f = x / 10**e
    return (1 if f < 1.5 else 2 if f < 3.5 else 5 if f < 7.5 else 10) * 10**e


def padded(lo: float, hi: float, log: bool, frac: float = 0.05) -> tuple[float, float]:
    """Domain with a margin so marks do not sit on the frame."""
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
        span = (hi - lo) or 0.5
        return 10 ** (lo - frac * span), 10 ** (hi + frac * span)
    span = (hi - lo) or 1.0
    return lo - frac * span, hi + frac * span


class Chart:
    """One SVG plot area with margins; marks are appended as strings and rendered once."""

    def __init__(self, width: int = 640, height: int = 340, left: int = 64, right: int = 16,
                 top: int = 28, bottom: int = 48, title: str = "", kind: str = "plot"):
        self.w, self.h = width, height
        self.x0, self.x1 = left, width - right
        self.y0, self.y1 = height - bottom, top  # y grows upward
        self.title = title
        self.kind = kind
        self.parts: list[str] = []

    def xscale(self, lo, hi, log=False) -> Scale:
        return Scale(lo, hi, self.x0, self.x1, log)

    def yscale(self, lo, hi, log=False) -> Scale:
        return Scale(lo, hi, self.y0, self.y1, log)

    def axes(self, xs: Scale | None, ys: Scale | None, xlabel: str = "", ylabel: str = "") -> None:
        p = self.parts
        p.append(f'<rect class="frame" x="{self.x0}" y="{self.y1}" width="{self.x1 - self.x0}" '
                 f'height="{self.y0 - self.y1}"/>')
        # grid lines in one path and tick labels in one group per axis: charts have hundreds of ticks
        if xs is not None:
            ticks = [(xs(t), fmt(t)) for t in xs.ticks()]
            p.append('<path class="grid" d="' + "".join(f"M{x:.1f} {self.y1}V{self.y0}" for x, _ in ticks) + '"/>')
            p.append('<g class="tick" text-anchor="middle">' + "".join(
                f'<text x="{x:.1f}" y="{self.y0 + 15}">{s}</text>' for x, s in ticks) + "</g>")
        if ys is not None:
            ticks = [(ys(t), fmt(t)) for t in ys.ticks()]
            p.append('<path class="grid" d="' + "".join(f"M{self.x0} {y:.1f}H{self.x1}" for y, _ in ticks) + '"/>')
            p.append('<g class="tick" text-anchor="end">' + "".join(
                f'<text x="{self.x0 - 6}" y="{y + 4:.1f}">{s}</text>' for y, s in ticks) + "</g>")
        if xlabel:
            p.append(f'<text class="label" x="{(self.x0 + self.x1) / 2:.0f}" y="{self.h - 10}" '
                     f'text-anchor="middle">{esc(xlabel)}</text>')
        if ylabel:
            cy = (self.y0 + self.y1) / 2
            p.append(f'<text class="label" transform="translate(14 {cy:.0f}) rotate(-90)" '
                     f'text-anchor="middle">{esc(ylabel)}</text>')

    def hline(self, y: float, cls: str = "ref", text: str = "") -> None:
        self.parts.append(f'<line class="{cls}" x1="{self.x0}" x2="{self.x1}" y1="{y:.1f}" y2="{y:.1f}"/>')
        if text:
            self.parts.append(f'<text class="reftext" x="{self.x1 - 4}" y="{y - 4:.1f}" text-anchor="end">{esc(text)}</text>')

    def points(self, pts, color: str | None = None, r: float = 4.0, cls: str = "pt") -> None:
        """Marks of one series in one ``<g>`` that carries their class and colour, so each circle
        holds only its position and hover text. For marks whose hover text is not a row of the
        per-shape table (the clocks chart's); a view's data marks are ``table_marks``. Centres
        are whole pixels: half a pixel off is invisible on a dot of radius 2.5 or more, and the
        decimals would cost 4 bytes a mark.

        ``pts``: (x, y, title) tuples, or (x, y, title, fill) where marks differ in colour.
        """
        circles = []
        for p in pts:
            fill = f' fill="{p[3]}"' if len(p) > 3 else ""
            circles.append(f'<circle cx="{p[0]:.0f}" cy="{p[1]:.0f}" r="{r:g}"{fill}>'
                           f'<title>{esc(p[2])}</title></circle>')
        if circles:
            g_fill = f' fill="{color}"' if color else ""
            self.parts.append(f'<g class="{cls}"{g_fill}>' + "".join(circles) + "</g>")

    def table_marks(self, marks, color: str | None = None, r: float = 4.0, cls: str = "pt",
                    tip: str = "speedup") -> None:
        """Marks of one series, each a row of the view's per-shape table, as data: report.js
        draws a ``<circle>`` per mark into this ``<g>`` on page load, with a ``<title>`` it writes
        from the row (method key, shape, winning layout, time, and the ``tip`` value:
        ``speedup``, ``tflops`` or ``efficiency``; report.js's TIP_VALUES).

        Written as SVG with its hover text, a mark took ~120 bytes, and a page holds ~150,000:
        the text repeated what the table data holds anyway. Here a mark is ``x,y,row`` (whole
        pixels, as ``points``; ``row``: the row's index in the view's table, see
        ``views._with_table_rows``), ~12 bytes, plus ``,#rrggbb`` where marks differ in colour.

        ``marks``: (x, y, row) tuples, or (x, y, row, fill).
        """
        if not marks:
            return
        data = " ".join(f"{m[0]:.0f},{m[1]:.0f},{m[2]}" + (f",{m[3]}" if len(m) > 3 else "") for m in marks)
        g_fill = f' fill="{color}"' if color else ""
        self.parts.append(f'<g class="{cls}"{g_fill} data-r="{r:g}" data-tip="{tip}" data-marks="{data}"></g>')

    def rect(self, x: float, y: float, w: float, h: float, color: str, title: str = "", cls: str = "cell") -> None:
        t = f"<title>{esc(title)}</title>" if title else ""
        self.parts.append(f'<rect class="{cls}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
                          f'height="{max(h, 0):.1f}" fill="{color}">{t}</rect>')

    def polyline(self, pts: list[tuple[float, float]], color: str, cls: str = "line") -> None:
        if pts:
            d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            self.parts.append(f'<polyline class="{cls}" points="{d}" stroke="{color}"/>')

    def text(self, x: float, y: float, s: str, anchor: str = "start", cls: str = "tick", title: str = "") -> None:
        t = f"<title>{esc(title)}</title>" if title else ""
        self.parts.append(f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{t}{esc(s)}</text>')

    def legend(self, items: list[tuple]) -> None:
        """Colour keys, left to right along the top margin; keys that do not fit in one row wrap
        into rows under the plot (the chart grows), so no key is cut off at the edge.

        ``items``: (name, colour) or (name, colour, hover text), e.g. a method key and its full spec.
        """
        span = self.x1 - self.x0 + 22
        rows: list[list] = [[]]
        x = 0.0
        for it in items:
            w = 22 + 6.5 * len(it[0])
            if rows[-1] and x + w > span:
                rows.append([])
                x = 0.0
            rows[-1].append((it, x))
            x += w
        if len(rows) == 1:
            y0 = self.y1 - 12
        else:
            y0 = self.h + 6
            self.h += 18 * len(rows) + 2
        for i, row in enumerate(rows):
            y = y0 + 18 * i
            for it, dx in row:
                x = self.x0 + dx
                hover = f"<title>{esc(it[2])}</title>" if len(it) > 2 and it[2] and it[2] != it[0] else ""
                self.parts.append(f'<g class="key">{hover}<circle cx="{x + 5:.1f}" cy="{y}" r="5" fill="{it[1]}"/>'
                                  f'<text class="legend" x="{x + 13:.1f}" y="{y + 4}">{esc(it[0])}</text></g>')

    def render(self) -> str:
        t = f"<title>{esc(self.title)}</title>" if self.title else ""
        return (f'<svg class="chart" data-kind="{esc(self.kind)}" xmlns="http://www.w3.org/2000/svg" '
                f'viewBox="0 0 {self.w} {self.h}" width="{self.w}" height="{self.h}" role="img">{t}'
                + "".join(self.parts) + "</svg>")


def diverging(v: float, span: float = 1.0) -> str:
    """Colour for log2(speedup): red (slower) - light grey (equal) - blue (faster), clamped at +-span."""
    f = max(-1.0, min(1.0, v / span))
    mid = (0xf2, 0xf2, 0xf2)
    end = (0x21, 0x66, 0xac) if f > 0 else (0xb2, 0x18, 0x2b)
    a = abs(f)
    r, g, b = (round(m + (e - m) * a) for m, e in zip(mid, end))
    return f"#{r:02x}{g:02x}{b:02x}"
