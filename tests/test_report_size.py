"""The report page stays small as results grow, without losing what a reader looks up.

The committed site had grown to 15 MB: every plot mark's tooltip repeated its method's full
config name (~180 characters for a family config), the table JSON repeated it on every row, and
the clock chart drew a dot per measured row. These tests build a site from a synthetic run with
long family config names and many shapes, and check both sides: the page's bytes per measured
row stay under a budget, and every row, method and value can still be found (tooltips name the
method by its short key and give shape and value; the full spec is on the page once per place a
reader looks it up; the table JSON decodes back to every row). At 38 runs the page was 28.6 MB again,
two thirds of it ~150,000 plot marks written as SVG with their hover text; the views' marks are
now data (x, y, table row) that report.js draws, and these tests check that every best-layout
row still has its marks and that the hover text written from a mark's row names its method by
key, its shape and its value (tests/test_report_browser.py checks the drawn marks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from harness.results import ResultStore
from reports import build_site
from reports.keys import method_keys
from reports.load import load_all
from reports.plots import MAX_CLOCK_BINS
from reports.views import TABLE_COLUMNS, build_runs
from test_report import BASELINE, base_us, make_row

SPEC = ("hopper:tile_m=128,tile_n=128,tile_k=64,cluster_m=2,cluster_n=1,schedule=pingpong,stages={s},"
        "scheduler=persistent,raster=0,swizzle=1,sms=0,sk_splits=1,sk_decomp=0,sk_reduction=0")
LONG = [SPEC.format(s=s) for s in range(2, 10)]  # 8 family configs, ~175 characters each
METHODS = [BASELINE, "cublas", *LONG]
DIP = 1000.0  # one row's SM clock, far under the others (~1980 MHz): binning must not hide it


def shapes(n: int, seed: int = 0) -> list[tuple[int, int, int]]:
    """n distinct shapes, not on a grid (so the speedup map is the M·N-vs-K scatter)."""
    rng = np.random.default_rng(seed)
    dims = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384]
    out: set[tuple[int, int, int]] = set()
    while len(out) < n:
        out.add(tuple(int(x) for x in rng.choice(dims, 3)))
    return sorted(out)


def write_long_run(path: Path, n_shapes: int, run_id: str = "run-long") -> Path:
    """One offline/warm run: every method on every shape in nn and tn, one row with a clock dip."""
    rng = np.random.default_rng(1)
    store = ResultStore(path, run_id)
    i = 0
    for shape in shapes(n_shapes):
        rows = []
        for method in METHODS:
            for layout in ("nn", "tn"):
                speedup = 1.0 if method == BASELINE else float(np.exp(rng.normal(0.0, 0.2)))
                r = make_row(run_id, "GPU-1", shape, layout, method, "offline", "warm",
                             base_us(shape, layout) / speedup, i)
                r.update(family=method.split(":")[0], is_baseline=":" not in method)
                if i == 123:
                    r["sm_clock_mhz_mean"] = DIP
                rows.append(r)
                i += 1
        store.add_group(rows, [])
    return path


@pytest.fixture(scope="module")
def long_site(tmp_path_factory):
    """(site index.html, results path, measured rows) for a 60-shape run: 1,200 rows."""
    tmp = tmp_path_factory.mktemp("long")
    path = write_long_run(tmp / "run" / "results.parquet", 60)
    return build_site([path], tmp / "site"), path, 60 * len(METHODS) * 2


def view_marks(html: str) -> list[tuple[str, str, list[tuple[int, int, int, str | None]]]]:
    """(view id, data-tip, marks) for every ``<g data-marks>`` of the views' plots
    (reports/svg.py Chart.table_marks); a mark is (x, y, table row, fill or None)."""
    out = []
    for vid, body in re.findall(r'<section class="view" id="([^"]+)"(.*?)</section>', html, re.S):
        for tip, data in re.findall(r'<g class="[^"]*"[^>]* data-tip="(\w+)" data-marks="([^"]*)"', body):
            marks = [m.split(",") for m in data.split(" ")]
            out.append((vid, tip, [(int(m[0]), int(m[1]), int(m[2]), m[3] if len(m) > 3 else None) for m in marks]))
    return out


def page_tables(html: str) -> dict[str, list[list]]:
    """The page's per-shape tables, decoded as report.js decodes them."""
    text = re.search(r'<script type="application/json" id="hg-data">(.*?)</script>', html, re.S).group(1)
    return decode(json.loads(text.replace("<\\/", "</")))


def mark_tip(row: list, tip: str, keys: dict[str, str]) -> str:
    """A mark's hover text as report.js's markTip writes it from the mark's (decoded) table row."""
    c = {name: i for i, name in enumerate(TABLE_COLUMNS)}
    v = row[c[tip]]
    value = {"speedup": f"speedup {v:.4g}x", "tflops": f"{v:.4g} TFLOP/s",
             "efficiency": f"efficiency {100 * v:.4g}%"}[tip]
    method = row[c["method"]]
    return (f"{keys.get(method, method)}\nM={row[c['m']]} N={row[c['n']]} K={row[c['k']]} "
            f"{row[c['layout']].removeprefix('best ')}\n{row[c['time_us']]:.4g} us\n{value}")


def test_page_bytes_per_measured_row_stay_under_budget(long_site):
    """The old page took ~2.5 kB per measured row here (the full spec in every mark's tooltip and
    every JSON row, a clock dot per row), then ~0.66 kB with marks as SVG with their hover text;
    with marks as data, ~0.27 kB."""
    index, _, rows = long_site
    per_row = index.stat().st_size / rows
    assert per_row < 400, f"{per_row:.0f} bytes of index.html per measured row"


def test_page_grows_about_linearly_with_shapes(tmp_path):
    """Four times the shapes: at most ~four times the page (no per-row cost that grows with the run)."""
    small = build_site([write_long_run(tmp_path / "s" / "results.parquet", 15)], tmp_path / "site-s")
    big = build_site([write_long_run(tmp_path / "b" / "results.parquet", 60)], tmp_path / "site-b")
    assert big.stat().st_size < 4.2 * small.stat().st_size


def test_every_best_row_has_marks_and_their_tooltips_name_the_method_by_key(long_site):
    index, _, _ = long_site
    html = index.read_text(encoding="utf-8")
    keys = method_keys(METHODS)
    assert all(keys[m] != m and len(keys[m]) < 20 for m in LONG)
    tables = page_tables(html)
    groups = view_marks(html)
    assert sum(len(marks) for _, _, marks in groups) > 1000
    views_html = re.sub(r'<svg class="chart" data-kind="clocks".*?</svg>', "", html, flags=re.S)
    assert not re.findall(r"<circle [^>]*><title>", views_html), "a view's plot mark is written as SVG"
    plotted = {vid: set() for vid in tables}
    for vid, tip, marks in groups:
        rows = [tables[vid][m[2]] for m in marks]
        assert all(r[3].startswith("best (") for r in rows), "a mark plots a best-layout row"
        assert len({r[4] for r in rows}) == 1, "a <g> holds one method's marks"
        plotted[vid] |= {m[2] for m in marks}
        for r in rows:
            t = mark_tip(r, tip, keys)
            assert "tile_m=" not in t, "a mark's tooltip repeats a full config name"
            assert t.split("\n")[0] in set(keys.values()), t
            assert re.search(r"M=\d+ N=\d+ K=\d+ \((nn|tn)\)\n", t), t
    # nothing a reader could hover before is lost: every best-layout row has its marks (the
    # baseline's only in device-time views: the roofline and throughput plots are the ones with it)
    for vid, rows in tables.items():
        best = {i for i, r in enumerate(rows)
                if r[3].startswith("best (") and (vid.endswith("-device") or r[4] != BASELINE)}
        assert plotted[vid] == best, vid
    for m in LONG:
        k = keys[m]
        assert any(tables[vid][mk[2]][4] == m for vid, _, marks in groups for mk in marks)
        # the key leads to the full spec: leaderboard rows and the legend entry's hover text
        assert f'<b class="key">{k}</b> {m}' in html
        legend = rf'<g class="key"><title>{re.escape(m)}</title><circle [^>]*/><text [^>]*>{re.escape(k)}</text>'
        assert re.search(legend, html)


def test_keys_are_stable_and_unique():
    """A key depends only on its own name: adding methods to a site never renames one."""
    alone = method_keys(LONG[:1])
    together = method_keys(METHODS + [SPEC.format(s=s) for s in range(10, 200)])
    assert alone[LONG[0]] == together[LONG[0]]
    assert len(set(together.values())) == len(together)
    assert together["cublas"] == "cublas"


def test_clock_chart_is_bounded_and_keeps_the_extremes(long_site):
    index, _, rows = long_site
    html = index.read_text(encoding="utf-8")
    (svg,) = re.findall(r'<svg class="chart" data-kind="clocks".*?</svg>', html, re.S)
    dots = len(re.findall(r"<circle [^>]*><title>", svg))
    assert dots <= 2 * (MAX_CLOCK_BINS + 1) < rows, f"{dots} clock dots for {rows} rows"
    assert "downsampled" in svg  # the chart says so
    assert f"min {DIP:.4g}" in svg  # a one-row dip is still in its bin's min (and its line)
    assert re.search(rf"rows \d+-\d+ of {rows}", svg)


def decode(data: dict) -> dict[str, list[list]]:
    """The page's table JSON back into rows, as report.js does (see reports/tabledata.py)."""
    cols = data["columns"]
    coded = {cols.index(c): vals for c, vals in data["values"].items()}
    lay, sp = cols.index("layout"), cols.index("speedup")
    out = {}
    for vid, rows in data["views"].items():
        full = [[coded[i][x] if i in coded else x for i, x in enumerate(r)] if len(r) == len(cols) else r
                for r in rows]
        out[vid] = [r if len(r) == len(cols) else
                    [f"best ({full[r[0]][j]})" if j == lay else r[1] if j == sp else full[r[0]][j]
                     for j in range(len(cols))] for r in full]
    return out


def test_table_json_holds_every_row_and_each_long_name_once(long_site):
    index, path, _ = long_site
    html = index.read_text(encoding="utf-8")
    text = re.search(r'<script type="application/json" id="hg-data">(.*?)</script>', html, re.S).group(1)
    data = json.loads(text.replace("<\\/", "</"))
    for m in LONG:
        assert text.count(m) == 1  # in values["method"] only
    runs = build_runs(load_all([path])[1], BASELINE, "device")
    want = {v.id: v.table for r in runs for v in r.views}
    assert decode(data) == want
    assert data["columns"] == TABLE_COLUMNS
    assert sum(len(t) for t in want.values()) > 2000
