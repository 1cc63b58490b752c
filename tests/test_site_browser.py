"""Load a built site in headless Chromium and use it as a reader would: it opens on the headline
view fast, tables sort and filter, a shape drills down, CSV downloads hold what is shown, the
charts draw, and nothing reaches the console as an error or the network at all.

Uses Python Playwright driving the system's Chromium (``/usr/bin/chromium``, or ``$CHROMIUM``),
else the Chromium ``python -m playwright install chromium`` puts in Playwright's cache. Skipped,
with the reason, where neither launches, unless ``HGEMM_REQUIRE_BROWSER=1`` (set by
``.ci/run``), which turns the skip into a failure. Screenshots go to ``test-artifacts/``.

By default the site is built from a real CPU ``compare`` run and two synthetic GPU runs; set
``HGEMM_REPORT_RESULTS`` to results files (``os.pathsep``-separated) to check a site built from
real runs instead.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports import build_site
from sitefiles import site_runs

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FIRST_PAINT_S = 1.5  # the headline view's leaderboard, drawn, from navigation start
MAX_ROWS_DRAWN = 500  # reports/static/table.js MAX_ROWS: rows a table draws at once

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
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "compare", "--device", "cpu",
           "-s", "64_64_64", "-s", "96_128_32", "--mode", "both", "--cache", "both", "--budget", "0.2",
           "--min-rounds", "2", "--max-rounds", "5", "--server-calls", "5", "--qps", "2000",
           "--label", "CPU pipeline check", "-o", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"CPU compare failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = os.environ.get("HGEMM_REPORT_RESULTS")
    if env:
        paths = [Path(p) for p in env.split(os.pathsep) if p]
    else:
        from test_report import write_run
        from test_report_site import FULL, write

        paths = [cpu_compare(out), write_run(out / "gpu" / "results.parquet"),
                 write(out / "7-full-comparison" / "full-comparison.parquet", "run-full", FULL + ["lib-a", "lib-b"], 0)]
    return build_site(paths, out / "site")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
    _need(sync_api is not None, "Python playwright not installed (pip install playwright)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        try:  # a fresh profile, the network-free flags, and downloads kept for the CSV tests
            ctx = p.chromium.launch_persistent_context(
                str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS, accept_downloads=True,
                viewport={"width": 1400, "height": 1000})
        except Exception as e:  # noqa: BLE001 - no browser: skip (or fail in CI) with the reason
            _need(False, f"Chromium does not launch ({CHROMIUM or 'Playwright cache'}): {str(e).splitlines()[0]}")
        yield ctx
        ctx.close()


@pytest.fixture
def page(browser, site):
    """A fresh tab on the site, recording console errors and any request off the site folder."""
    pg = browser.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pg.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    pg.on("request", lambda r: None if r.url.startswith(("file:", "data:", "about:", "blob:"))
          else errors.append(f"network request: {r.url}"))
    pg.errors = errors
    pg.goto(site.as_uri(), wait_until="load")
    pg.wait_for_selector("section.view .leaderboard tbody tr")
    yield pg
    assert errors == []
    pg.close()


def _rows(pg, where: str) -> list[list[str]]:
    return pg.locator(f"{where} table.grid tbody tr").evaluate_all(
        "trs => trs.map(tr => Array.from(tr.cells, td => td.innerText))")


def _col(pg, where: str, name: str) -> int:
    heads = pg.locator(f"{where} table.grid thead tr:first-child th").all_inner_texts()
    return [h.rstrip(" ▲▼") for h in heads].index(name)


def test_opens_on_the_headline_view_fast_and_draws_its_charts(page, site):
    index, runs = site_runs(site)
    lead = next(r for r in index["runs"] if r["id"] == index["headline"])
    view = page.locator("section.view")
    assert view.get_attribute("data-run") == lead["id"] and lead["full"]
    assert page.locator(".banner.lead").inner_text().startswith("Headline")
    assert lead["name"] in page.locator("section.view h2").inner_text()
    times = page.evaluate("""() => ({
        paint: performance.getEntriesByName('first-contentful-paint')[0].startTime,
        headline: performance.getEntriesByName('hg-headline')[0].startTime})""")
    assert times["paint"] < FIRST_PAINT_S * 1000 and times["headline"] < FIRST_PAINT_S * 1000, times
    page.wait_for_function("document.querySelectorAll('section.view figure.chart.drawn svg').length >= 4",
                           timeout=30_000)
    assert page.locator("section.view figure.chart.drawn svg .mark-symbol path").count() > 0  # the points
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "site-headline.png"), full_page=True)


def test_leaderboard_sorts_and_switches_layouts(page):
    lb = "section.view .leaderboard"
    col, rank = _col(page, lb, "speedup (geomean)"), _col(page, lb, "#")
    rows = _rows(page, lb)
    assert [int(r[rank]) for r in rows] == list(range(1, len(rows) + 1))  # the report's order: ranked first
    few = page.locator(f"{lb} tbody tr").evaluate_all("trs => trs.map(tr => tr.classList.contains('few'))")
    assert few == sorted(few)  # methods without a CI (too few shapes) come after every other

    def scores():
        return [float(r[col].rstrip("×")) for r in _rows(page, lb) if r[col] != "—"]
    head = page.locator(f"{lb} thead tr:first-child th[data-col=geomean]")
    head.click()
    assert scores() == sorted(scores()) and len(scores()) >= 2
    head.click()
    assert scores() == sorted(scores(), reverse=True)
    best = len(_rows(page, lb))
    page.locator("section.view .lb-layout button[data-layout=all]").click()
    assert len(_rows(page, lb)) > best


def test_model_shapes_are_grouped_by_model_layer(page):
    """The synthetic full run records its two decode shapes as Llama-3.1-8B's o_proj."""
    if os.environ.get("HGEMM_REPORT_RESULTS"):
        pytest.skip("the given runs' headline may hold no model shapes")
    rows = _rows(page, "section.view .models")
    lib = [r for r in rows if r[0] == "Llama-3.1-8B o_proj" and r[1].startswith("lib-a")]
    assert len(lib) == 1 and lib[0][2] == "1.200×" and lib[0][3] == "2" and lib[0][4] == "1, 16"
    origin = _col(page, "section.view .shapes", "model layer")
    shapes = [r for r in _rows(page, "section.view .shapes") if r[origin]]
    assert shapes and {r[origin] for r in shapes} == {"Llama-3.1-8B o_proj"}


def test_per_shape_table_filters_sorts_and_downloads_what_is_shown(page):
    host = "section.view .shapes"
    # a table draws at most MAX_ROWS_DRAWN rows (a 100-shape headline holds ~1,500); its count says how many
    total = int(re.match(r"(\d+) of \1 rows", page.locator(f"{host} .count").inner_text()).group(1))
    assert len(_rows(page, host)) == min(total, MAX_ROWS_DRAWN)
    k_col = _col(page, host, "K")
    ks = sorted({int(r[k_col]) for r in _rows(page, host)})
    page.locator(f"{host} input.f[data-col=k]").fill(str(ks[0]))
    shown = _rows(page, host)
    assert 0 < len(shown) < total and {int(r[k_col]) for r in shown} == {ks[0]}
    page.locator(f"{host} input.f[data-col=layout]").fill("best")
    m_head = page.locator(f"{host} thead tr:first-child th[data-col=m]")
    m_head.click()  # the table opens sorted by M ascending: one click sorts it descending
    assert "desc" in m_head.get_attribute("class")
    shown = _rows(page, host)
    ms = [int(r[0]) for r in shown]
    assert ms == sorted(ms, reverse=True) and all(r[3].startswith("best") for r in shown)
    assert page.locator(f"{host} .count").inner_text().startswith(f"{len(shown)} of {total} rows")
    with page.expect_download() as dl:
        page.locator(f"{host} button.csv").click()
    table = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text())))
    assert len(table) == len(shown) and [int(r["m"]) for r in table] == ms
    assert {int(r["k"]) for r in table} == {ks[0]} and all(r["layout"].startswith("best") for r in table)
    assert all(float(r["time_us"]) > 0 for r in table)


def test_a_shape_drills_down_to_every_method_and_layout_on_it(page):
    host = "section.view .shapes"
    first = _rows(page, host)[0]
    page.locator(f"{host} tbody tr").first.click()
    page.wait_for_selector("section.drill .shape-rows tbody tr")
    shape = "_".join(first[:3])
    assert page.evaluate("location.hash").endswith("/" + shape)
    rows = _rows(page, "section.drill")
    assert {"_".join(r[:3]) for r in rows} == {shape} and len({r[4] for r in rows}) >= 2
    assert {r[3] for r in rows} >= {"nn", "tn"}
    page.wait_for_selector("section.drill figure.chart.drawn svg", timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "site-shape.png"), full_page=True)
    page.locator("section.drill .crumbs a").click()
    page.wait_for_selector("section.view .shapes tbody tr")


def test_cross_run_board_lists_methods_with_their_runs_and_downloads(page, site):
    index, _ = site_runs(site)
    page.locator("#nav-board").click()
    page.wait_for_selector("section.board tbody tr")
    rows = _rows(page, "section.board")
    ranked = [b for b in index["board"] if b["shapes"] >= index["board_min_shapes"]]
    assert len(rows) == len(ranked) > 0  # the shapes filter starts at the fewest with a CI
    assert page.locator("section.board input.f[data-col=shapes]").input_value() == f">={index['board_min_shapes']}"
    page.locator("section.board input.f[data-col=shapes]").fill("")
    assert len(_rows(page, "section.board")) == len(index["board"])
    with page.expect_download() as dl:
        page.locator("section.board button.csv").click()
    table = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text())))
    assert {r["method"] for r in table} == {b["method"] for b in index["board"]}
    page.locator("section.board tbody tr a").first.click()  # a row's run opens that run
    page.wait_for_selector("section.view .leaderboard tbody tr")
    ARTIFACTS.mkdir(exist_ok=True)


def test_every_run_and_view_opens_by_selector_or_link(page, site):
    index, runs = site_runs(site)
    for r in index["runs"]:
        page.select_option("#sel-run", r["id"])
        page.wait_for_selector(f"section.view[data-run={r['id']}] .leaderboard tbody tr")
        assert runs[r["id"]]["name"] in page.locator("section.view h2").inner_text()
        for v in r["views"]:
            page.evaluate(f"location.hash = '#{v['id']}'")
            page.wait_for_selector(f"section.view[id='{v['id']}'] .shapes tbody tr")
    gpu = next(r for r in index["runs"] if runs[r["id"]]["clocks"])
    page.select_option("#sel-run", gpu["id"])
    page.locator("section.view details.runinfo summary").click()  # the run's facts, and its clock chart
    assert page.locator("section.view table.env").count() == 1
    page.wait_for_selector("details.runinfo figure.chart.drawn svg", timeout=30_000)
    cpu = [r for r in index["runs"] if r["cpu"]]
    if cpu:  # a CPU run says so before anything else
        page.select_option("#sel-run", cpu[0]["id"])
        page.wait_for_selector(".banner.cpu")
