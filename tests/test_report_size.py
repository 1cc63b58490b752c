"""The site stays small as results grow, without losing what a reader looks up.

The page once grew to 25 MB: every view and chart of every run inline, each plot mark's tooltip
repeating its method's full config name (~180 characters for a family config). Now index.html
holds only the run list and the cross-run leaderboard, each run's views are in its own data file
loaded when shown, and inside it every long name is written a fixed number of times however
many shapes the run has (the table rows name methods by index). These tests build sites from a
synthetic run with long family config names and check both sides: bytes per measured row stay
under a budget and do not grow with the run, and every row, method and value can still be found
(the tables decode back to every row the report computed; the clock data is bounded and keeps a
one-row dip).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.results import ResultStore
from reports import build_site
from reports.clocks import MAX_CLOCK_POINTS
from reports.keys import method_keys
from reports.load import load_all
from reports.views import TABLE_COLUMNS, build_runs
from sitefiles import run_file, site_runs
from test_report import BASELINE, base_us, make_row

SPEC = ("hopper:tile_m=128,tile_n=128,tile_k=64,cluster_m=2,cluster_n=1,schedule=pingpong,stages={s},"
        "scheduler=persistent,raster=0,swizzle=1,sms=0,sk_splits=1,sk_decomp=0,sk_reduction=0")
LONG = [SPEC.format(s=s) for s in range(2, 10)]  # 8 family configs, ~175 characters each
METHODS = [BASELINE, "cublas", *LONG]
DIP = 1000.0  # one row's SM clock, far under the others (~1980 MHz): binning must not hide it


def shapes(n: int, seed: int = 0) -> list[tuple[int, int, int]]:
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
def sites(tmp_path_factory):
    """{shapes: (index.html, results path, measured rows)} for runs of 15 and 60 shapes."""
    tmp = tmp_path_factory.mktemp("long")
    out = {}
    for n in (15, 60):
        path = write_long_run(tmp / f"run{n}" / "results.parquet", n)
        out[n] = (build_site([path], tmp / f"site{n}"), path, n * len(METHODS) * 2)
    return out


def test_run_data_bytes_per_measured_row_stay_under_budget(sites):
    """~0.19 kB per measured row (two views, device and host time, of coded table rows with
    best-layout rows as references); the page itself holds no rows at all."""
    index, _, rows = sites[60]
    data = (index.parent / "data" / "r0.js").stat().st_size
    assert data / rows < 250, f"{data / rows:.0f} bytes of run data per measured row"
    assert index.stat().st_size < 20_000


def test_page_and_run_data_grow_at_most_linearly(sites):
    (small, _, _), (big, _, _) = sites[15], sites[60]
    assert big.stat().st_size < 1.2 * small.stat().st_size  # the page: run list and board only
    sizes = [(s.parent / "data" / "r0.js").stat().st_size for s in (small, big)]
    assert sizes[1] < 4.2 * sizes[0]


def test_each_long_name_is_written_a_fixed_number_of_times(sites):
    """However many shapes: the table rows name a method by index, never by its full spec. The
    name is written in the key and role maps, the tables' method list and each view's three
    leaderboard entries (best, nn, tn: label and method): 16 times for two views."""
    counts = []
    for n in (15, 60):
        text = (sites[n][0].parent / "data" / "r0.js").read_text(encoding="utf-8")
        counts.append([text.count(m) for m in LONG])
    assert counts[0] == counts[1] and max(counts[0]) <= 16


def decode(tables: dict) -> dict[str, list[list]]:
    """A run file's tables back into rows, as app.js decodes them (see reports/tabledata.py)."""
    cols = tables["columns"]
    coded = {cols.index(c): vals for c, vals in tables["values"].items()}
    lay, sp = cols.index("layout"), cols.index("speedup")
    out = {}
    for vid, rows in tables["views"].items():
        full = [[coded[i][x] if i in coded else x for i, x in enumerate(r)] if len(r) == len(cols) else r
                for r in rows]
        out[vid] = [r if len(r) == len(cols) else
                    [f"best ({full[r[0]][j]})" if j == lay else r[1] if j == sp else full[r[0]][j]
                     for j in range(len(cols))] for r in full]
    return out


def test_run_tables_decode_to_every_row_with_keys_for_long_names(sites):
    index, path, _ = sites[60]
    data = run_file(index.parent, "r0")
    runs = build_runs(load_all([path])[1], BASELINE, "device")
    want = {v.id: v.table for r in runs for v in r.views}
    assert decode(data["tables"]) == want and data["tables"]["columns"] == TABLE_COLUMNS
    assert sum(len(t) for t in want.values()) > 2000
    keys = method_keys(METHODS)
    assert all(keys[m] != m and len(keys[m]) < 20 for m in LONG)
    coded = dict(zip(data["tables"]["values"]["method"], data["tables"]["keys"]))
    assert all(coded[m] == keys[m] for m in LONG) and coded["cublas"] is None


def test_keys_are_stable_and_unique():
    """A key depends only on its own name: adding methods to a site never renames one."""
    alone = method_keys(LONG[:1])
    together = method_keys(METHODS + [SPEC.format(s=s) for s in range(10, 200)])
    assert alone[LONG[0]] == together[LONG[0]]
    assert len(set(together.values())) == len(together)
    assert together["cublas"] == "cublas"


def test_clock_data_is_bounded_and_keeps_the_extremes(sites):
    index, _, rows = sites[60]
    _, runs = site_runs(index)
    pts = runs["r0"]["clocks"]
    assert len(pts) <= MAX_CLOCK_POINTS < rows
    assert sum(p["rows"] for p in pts) == rows
    assert min(p["sm_lo"] for p in pts) == DIP  # a one-row dip is still its bin's min
    assert all(p["sm_lo"] <= p["sm"] <= p["sm_hi"] for p in pts)
