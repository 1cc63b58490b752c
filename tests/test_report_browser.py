"""Load a built report in headless Chromium: no console errors, views switch, tables and plots render.

Uses Python Playwright driving the system's Debian Chromium (``/usr/bin/chromium``; never a
downloaded browser). Skipped, with the reason, where Chromium or Playwright is absent, unless
``HGEMM_REQUIRE_BROWSER=1`` (set by ``.ci/run``), which turns the skip into a failure. The
screenshots are kept in ``test-artifacts/``.

By default the site is built from a synthetic run; set ``HGEMM_REPORT_RESULTS`` to one or more
results files (``os.pathsep``-separated) to check a site built from a real ``compare`` run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports import build_site

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# CI sets HGEMM_REQUIRE_BROWSER=1: there, a missing browser is a failure, never a quiet skip.
REQUIRED = os.environ.get("HGEMM_REQUIRE_BROWSER") == "1"


def _need(ok: bool, reason: str) -> None:
    if not ok:
        if REQUIRED:
            pytest.fail(f"{reason} (HGEMM_REQUIRE_BROWSER=1)")
        pytest.skip(reason)


def cpu_compare(out: Path) -> Path:
    """A real (tiny) CPU ``compare`` run through the CLI: the report must read what compare writes."""
    path = out / "cpu" / "results.parquet"
    cmd = [sys.executable, "-c", "from harness.cli import app; app()", "compare", "--device", "cpu",
           "-s", "64_64_64", "-s", "96_128_32", "--mode", "both", "--cache", "both", "--budget", "0.2",
           "--min-rounds", "2", "--max-rounds", "5", "--server-calls", "5", "--qps", "2000", "-o", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"CPU compare failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A site from a real CPU compare run plus a synthetic GPU run (several runs in one site,
    and GPU-only content: clocks, roofline, best-of-layouts against cuBLASLt)."""
    out = tmp_path_factory.mktemp("site")
    env = os.environ.get("HGEMM_REPORT_RESULTS")
    if env:
        paths = [Path(p) for p in env.split(os.pathsep) if p]
    else:
        from test_report import write_run

        paths = [cpu_compare(out), write_run(out / "gpu" / "results.parquet")]
    return build_site(paths, out / "site")


@pytest.fixture(scope="module")
def page(site, tmp_path_factory):
    _need(CHROMIUM is not None, "Chromium not installed (apt-get install chromium)")
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
    _need(sync_api is not None, "Python playwright not installed (pip install playwright; it drives the system Chromium)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        # a fresh profile dir (persistent context) and the network-free flags CI requires
        ctx = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS[1:],
            viewport={"width": 1400, "height": 1000},
        )
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        pg.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
        # no CDN, no network: everything the page loads comes from the site folder
        pg.on("request", lambda r: None if r.url.startswith(("file:", "data:", "about:"))
              else errors.append(f"network request: {r.url}"))
        pg.goto(site.as_uri(), wait_until="load")
        pg.wait_for_selector("section.view:not([hidden]) table.shapes tbody tr")
        pg.errors = errors
        yield pg
        ctx.close()


def visible_view(page):
    return page.locator("section.run:not([hidden]) section.view:not([hidden])")


def test_loads_without_console_errors(page):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=False)
    page.screenshot(path=str(ARTIFACTS / "report-full.png"), full_page=True)
    assert page.errors == []


def test_leaderboard_rows_and_plots_present(page):
    v = visible_view(page)
    assert v.count() == 1
    rows = v.locator("table.leaderboard tr.lb-row:not([hidden])")
    assert rows.count() >= 1
    assert rows.first.locator("td.rank").inner_text() == "1"
    v.locator(".lb-layout button[data-layout=all]").click()  # per-layout rows and best-layout rows
    assert rows.count() >= 2 and rows.nth(rows.count() - 1).locator("td.rank").inner_text() == str(rows.count())
    assert v.locator("svg.chart").count() >= 3
    assert v.locator("svg.chart circle, svg.chart rect.cell").count() > 0
    # hover text names the shape
    assert "M=" in v.locator("svg.chart circle title").first.text_content()


def test_view_switching_never_mixes(page):
    seen = set()
    for dim in ("mode", "cache", "metric"):
        for b in page.locator(f"nav .seg[data-dim={dim}] button").all():
            b.click()
            v = visible_view(page)
            assert v.count() == 1
            seen.add(v.get_attribute("id"))
            assert page.errors == []
    assert len(seen) >= 2


def test_per_shape_table_filters_and_sorts(page):
    v = visible_view(page)
    body = v.locator("table.shapes tbody tr")
    total = body.count()
    assert total > 0
    k_values = sorted({int(t) for t in v.locator("table.shapes tbody td:nth-child(3)").all_inner_texts()})
    v.locator(".filters input[data-col=k]").fill(str(k_values[0]))
    assert 0 < body.count() <= total
    assert {int(t) for t in v.locator("table.shapes tbody td:nth-child(3)").all_inner_texts()} == {k_values[0]}
    v.locator(".filters input[data-col=k]").fill("")
    v.locator("table.shapes th[data-col=m]").click()
    v.locator("table.shapes th[data-col=m]").click()  # descending
    ms = [int(t) for t in v.locator("table.shapes tbody td:nth-child(1)").all_inner_texts()]
    assert ms == sorted(ms, reverse=True)
    assert page.errors == []


def test_run_selector_switches_runs(page):
    options = page.locator("#sel-run option")
    for i in range(options.count()):
        page.select_option("#sel-run", index=i)
        run = page.locator("section.run:not([hidden])")
        assert run.count() == 1
        assert visible_view(page).locator("tr.lb-row").count() > 0
    assert page.errors == []


def test_views_are_linkable_by_hash(page):
    ids = page.eval_on_selector_all("section.view", "els => els.map(e => e.id)")
    assert len(ids) == len(set(ids)) >= 2
    for vid in (ids[-1], ids[0]):
        page.evaluate(f"location.hash = '#{vid}'")
        page.wait_for_function(f"document.getElementById('{vid}').hidden === false")
        assert visible_view(page).get_attribute("id") == vid
    assert page.errors == []


def _show(page, vid):
    page.evaluate(f"location.hash = '#{vid}'")
    page.wait_for_function(f"document.getElementById('{vid}').hidden === false")


def test_per_shape_table_holds_every_row_of_every_view(page, site):
    """The table JSON is compact (reports/tabledata.py: coded texts, best-layout rows as references);
    decoded in the page it gives back every row the report computed, best-layout rows included."""
    from reports.keys import method_keys
    from reports.load import load_all
    from reports.views import TABLE_COLUMNS, build_runs

    paths = sorted((site.parent / "data").glob("*/*.parquet"), key=lambda p: int(p.parent.name.split("-")[0]))
    df = load_all(paths)[1]
    tables = {v.id: v.table for r in build_runs(df, "cublaslt-autotune", "device") for v in r.views}
    keys = method_keys(df["method"])
    shown_name = {m: m if k == m else f"{k} {m}" for m, k in keys.items()}  # a long name follows its key
    col = {c: i for i, c in enumerate(TABLE_COLUMNS)}
    for vid, rows in tables.items():
        _show(page, vid)
        count = page.locator(f"#{vid} .filters .count").inner_text()
        assert count.startswith(f"{len(rows)} of {len(rows)} rows"), (vid, count)
    vid, rows = next((k, t) for k, t in tables.items()
                     if k.endswith("-device") and any(r[col["layout"]].startswith("best") for r in t))
    _show(page, vid)
    page.select_option(f"#{vid} .filters select[data-col=layout]", "best")
    cells = page.locator(f"#{vid} table.shapes tbody tr").evaluate_all(
        "trs => trs.map(tr => Array.from(tr.cells, td => td.innerText))")
    best = [r for r in rows if r[col["layout"]].startswith("best")]
    assert len(cells) == len(best) > 0
    shown = sorted((int(c[0]), int(c[1]), int(c[2]), c[3], c[4], float(c[7].rstrip("×"))) for c in cells)
    want = sorted((r[0], r[1], r[2], r[3], shown_name[r[4]], float(f"{r[col['speedup']]:.3g}")) for r in best)
    assert [s[:5] for s in shown] == [w[:5] for w in want]
    assert all(abs(s[5] - w[5]) <= 0.006 * w[5] for s, w in zip(shown, want))
    page.select_option(f"#{vid} .filters select[data-col=layout]", "")
    assert page.errors == []


def test_speedup_map_select_shows_one_method_layer(page):
    """All methods' maps of a view are layers of one chart; the select shows one at a time."""
    vid = page.eval_on_selector_all("section.view", "els => els.map(e => e.id)")[0]
    _show(page, vid)
    v = page.locator(f"#{vid}")
    options = v.locator(".map-sel option")
    layers = v.locator(".map g.layer")
    assert options.count() == layers.count() >= 2
    shown = [i for i in range(layers.count()) if layers.nth(i).get_attribute("display") != "none"]
    assert shown == [0]  # the first layer, as without script
    key = options.nth(1).get_attribute("value")
    v.locator(".map-sel").select_option(key)
    shown = [i for i in range(layers.count()) if layers.nth(i).get_attribute("display") != "none"]
    assert shown == [1] and layers.nth(1).get_attribute("data-key") == key
    # the shown layer's marks name its method in their hover text
    first = layers.nth(1).locator("circle > title, rect.cell > title").first.text_content()
    assert first.startswith(key + "\n") and "M=" in first
    assert page.errors == []


def test_plot_marks_are_drawn_with_their_table_rows_hover_text(page, site):
    """The views' plot marks are data in the page (reports/svg.py Chart.table_marks): report.js
    draws each as a ``<circle>`` at its place with a ``<title>`` written from the table row it
    plots. Every mark of every view is checked against the text written here from the page's
    table data (tests/test_report_size.py), and a drawn mark takes the pointer when hovered."""
    from reports.keys import method_keys
    from test_report_size import mark_tip, page_tables, view_marks

    html = site.read_text(encoding="utf-8")
    tables = page_tables(html)
    keys = method_keys(sorted({r[4] for rows in tables.values() for r in rows}))
    groups = view_marks(html)
    assert sum(len(marks) for _, _, marks in groups) > 0
    drawn = page.eval_on_selector_all(
        "section.view svg.chart g[data-marks]",
        "gs => gs.map(g => Array.from(g.children, c => [c.tagName, c.getAttribute('cx'), c.getAttribute('cy'),"
        " c.getAttribute('r') === g.getAttribute('data-r'), c.getAttribute('fill'), c.querySelector('title').textContent]))")
    assert len(drawn) == len(groups)
    for got, (vid, tip, marks) in zip(drawn, groups):
        want = [["circle", str(x), str(y), True, fill, mark_tip(tables[vid][row], tip, keys)]
                for x, y, row, fill in marks]
        assert got == want, vid
    v = visible_view(page)
    dots = v.locator("svg.chart[data-kind=speedup-size] g[data-marks] circle")
    assert dots.count() > 0
    top = dots.last  # drawn last: nothing is painted over it
    top.hover()
    assert top.evaluate("c => c.matches(':hover')")
    text = top.locator("title").text_content()
    number = r"[\d.e+-]+"
    assert re.fullmatch(rf"\S+\nM=\d+ N=\d+ K=\d+ \((nn|tn)\)\n{number} us\nspeedup {number}x", text), text
    assert page.errors == []
