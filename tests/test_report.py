"""CPU tests for ``reports``: statistics, best-of-layouts, view separation, bad inputs, site build.

The synthetic runs are written through the real ``ResultStore`` (same files, metadata and
samples layout as ``compare``), with times built from known speedup ratios so that every
statistic can be checked against a value computed here independently of the report code.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.results import (
    META_KEY, RESULT_SCHEMA, SCHEMA_VERSION, ResultsError, ResultStore, atomic_write_table, rows_to_table,
)
from reports import build_site
from reports.derive import rankable, with_best_of_layouts
from reports.load import load_all
from reports.stats import geomean, geomean_ci, leaderboard, paired_speedups
from reports.views import build_runs
from sitefiles import site_runs

SHAPES = [(m, n, k) for k in (256, 4096) for m in (128, 1024, 4096) for n in (128, 1024, 4096)]
BASELINE = "cublaslt-autotune"
FAILED = ("search-a", (1024, 1024, 4096), "tn")  # gate failure (offline, warm)
SUSPECT = ("cublas", (4096, 4096, 4096), "nn")   # below the physical floor (offline, warm)
THROTTLED = ("torch-matmul", (128, 1024, 256), "tn")  # measured while throttled (offline, cold)


def floor_us(m, n, k):
    return max(2 * m * n * k / 990e6, 2 * (m * k + k * n + m * n) / 4.8e6)


def true_speedup(method: str, layout: str, shape, mode: str) -> float:
    """The ratio baseline/method that the synthetic times are built from (same layout)."""
    m, n, k = shape
    if method == BASELINE:
        return 1.0
    if method == "search-a":
        # nn: 2x on small outputs, 0.8x on big ones; tn: flat 1.1x. Server mode: all halved.
        s = (2.0 if m * n <= 1024 * 128 else 0.8) if layout == "nn" else 1.1
        return s * (0.5 if mode == "server" else 1.0)
    if method == "cublas":
        return 0.9
    return 0.7  # torch-matmul


def base_us(shape, layout: str) -> float:
    # the baseline's tn layout is 1.5x slower than nn, so best-of-layouts picks nn for it
    return floor_us(*shape) * 3.0 * (1.5 if layout == "tn" else 1.0) + 5.0


def make_row(run_id, gpu, shape, layout, method, mode, cache, t, i, device="cuda"):
    m, n, k = shape
    row = dict(
        schema_version=SCHEMA_VERSION, run_id=run_id, measured_at=f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}Z",
        device=device, gpu_name="NVIDIA H200" if device == "cuda" else None,
        gpu_uuid=gpu if device == "cuda" else None, driver="570.1", cuda_version="12.8",
        torch_version="2.9.0", cublas_version="12.8.4", cublaslt_version="12.8.4",
        nvmath_version="0.6.0", hgemm_bench_version="0.1.0", hostname="h200-a",
        shape=f"{m}_{n}_{k}", m=m, n=n, k=k, layout=layout, dtype="float16",
        method=method, family=method.split("-")[0], is_baseline=method != "search-a",
        config="{}", source_hash="abc", info="{}", setup_s=0.1,
        mode=mode, cache=cache, timing_method="graph" if mode == "offline" else "events",
        qps=1000.0 if mode == "server" else None, input_sets=1 if cache == "warm" else 8,
        ci_target=0.01, stop_reason="ci", status="ok", status_reason=None, gate_passed=True,
        gate_rel_fro_err=1e-4, gate_max_norm_err=1e-3, gate_tol_rel_fro=4e-4, gate_tol_max_norm=4e-3,
        device_us_median=t, device_us_mean=t * 1.01, device_us_p10=t * 0.98, device_us_p90=t * 1.03,
        device_us_p99=t * 1.1, device_us_ci_lo=t * 0.99, device_us_ci_hi=t * 1.01,
        # host time: a flat 30 us launch overhead on top, so host speedups differ from device ones
        host_us_median=t + 30.0, host_us_mean=t + 31.0, host_us_p90=t + 33.0, host_us_p99=t + 40.0,
        calls_per_batch=100, rounds=20, calls_measured=2000,
        tflops=2 * m * n * k / (t * 1e-6) / 1e12, floor_us=floor_us(m, n, k), below_floor=False,
        sm_clock_mhz_mean=1980.0 - (i % 7), mem_clock_mhz_mean=3201.0, power_w_mean=300.0 + (i % 50),
        temp_c_max=60.0, throttled=False, throttle_reasons="",
    )
    return row


def write_run(path: Path, run_id="run-a", gpu="GPU-1", scale=1.0, device="cuda",
              modes=(("offline", "warm"), ("offline", "cold"), ("server", "warm"))) -> Path:
    """Write one synthetic run through ResultStore, group by group, with raw samples."""
    store = ResultStore(path, run_id)
    i = 0
    for mode, cache in modes:
        for shape in SHAPES:
            rows, samples = [], []
            for method in (BASELINE, "cublas", "torch-matmul", "search-a"):
                for layout in ("nn", "tn"):
                    t = scale * base_us(shape, layout) / true_speedup(method, layout, shape, mode)
                    r = make_row(run_id, gpu, shape, layout, method, mode, cache, t, i, device)
                    i += 1
                    if (mode, cache) == ("offline", "warm") and (method, shape, layout) == FAILED:
                        r.update(status="gate_failed", status_reason="rel_fro 0.2 > tol", gate_passed=False,
                                 gate_rel_fro_err=0.2, device_us_median=None, host_us_median=None)
                    if (mode, cache) == ("offline", "warm") and (method, shape, layout) == SUSPECT:
                        r.update(device_us_median=r["floor_us"] * 0.5, below_floor=True)
                    if (mode, cache) == ("offline", "cold") and (method, shape, layout) == THROTTLED:
                        r.update(throttled=True, throttle_reasons="hw_slowdown")
                    rows.append(r)
                    samples += [dict(run_id=run_id, gpu_uuid=r["gpu_uuid"], shape=r["shape"], layout=layout,
                                     method=method, mode=mode, cache=cache, round=j, metric="device_us",
                                     value=t, sm_clock_mhz=1980.0) for j in range(3)]
            store.add_group(rows, samples)
    return path


@pytest.fixture(scope="module")
def run_a(tmp_path_factory) -> Path:
    """One synthetic GPU run shared by the module's tests (none of them modifies the file)."""
    return write_run(tmp_path_factory.mktemp("run") / "a" / "results.parquet")


def view_speedups(path: Path, mode="offline", cache="warm", metric="device"):
    _, df = load_all([path])
    raw = df[(df["mode"] == mode) & (df["cache"] == cache)]
    sp = paired_speedups(with_best_of_layouts(raw, metric), BASELINE, metric)
    return raw, sp, {(e.method, e.layout): e for e in leaderboard(sp, raw, BASELINE, metric)}


def test_geomean_and_win_rate_match_known_ratios(run_a):
    """search-a's nn speedups are 2.0 on 6 of 18 shapes and 0.8 on the rest: check the score."""
    _, _, lb = view_speedups(run_a)
    e = lb[("search-a", "nn")]
    want = [true_speedup("search-a", "nn", s, "offline") for s in SHAPES]
    assert e.geomean == pytest.approx(math.exp(np.mean(np.log(want))), rel=1e-9)
    assert e.wins == sum(w > 1 for w in want) == 6
    assert e.win_rate == pytest.approx(6 / 18)
    assert e.covered == e.shapes_total == 18
    assert e.ci_lo <= e.geomean <= e.ci_hi and e.ci_lo < e.ci_hi
    assert lb[("cublas", "tn")].geomean == pytest.approx(0.9)
    assert lb[(BASELINE, "nn")].geomean == pytest.approx(1.0)


def test_ranking_order_is_by_geomean(run_a):
    _, df = load_all([run_a])
    raw = df[(df["mode"] == "offline") & (df["cache"] == "cold")]
    sp = paired_speedups(with_best_of_layouts(raw, "device"), BASELINE, "device")
    scores = [e.geomean for e in leaderboard(sp, raw, BASELINE, "device")]
    assert scores == sorted(scores, reverse=True)


def test_best_of_layouts_pairs_best_with_best(run_a):
    """Derived rows take each method's faster layout and pair with the baseline's faster layout."""
    _, sp, lb = view_speedups(run_a, cache="cold")
    shape = (128, 128, 256)  # search-a: nn 2x, tn 1.1x over a baseline whose tn is 1.5x slower
    row = sp[(sp["method"] == "search-a") & (sp["layout"] == "best") & (sp["shape"] == "128_128_256")].iloc[0]
    x_nn = base_us(shape, "nn") / 2.0
    x_tn = base_us(shape, "tn") / 1.1
    assert row["best_of"] == ("nn" if x_nn < x_tn else "tn")
    assert row["speedup"] == pytest.approx(base_us(shape, "nn") / min(x_nn, x_tn))
    assert row["label"] == "search-a [best layout]"
    assert lb[("search-a", "best")].covered == 18
    # every derived row is a copy of a measured row
    assert sp.loc[sp["layout"] == "best", "derived"].all()


def test_failed_and_suspect_rows_are_never_ranked(run_a):
    raw, sp, lb = view_speedups(run_a)
    assert (~rankable(raw)).sum() == 2
    failed_method, failed_shape, failed_layout = FAILED
    name = "_".join(map(str, failed_shape))
    assert sp[(sp["method"] == failed_method) & (sp["shape"] == name) & (sp["layout"] == failed_layout)].empty
    assert lb[(failed_method, "tn")].covered == 17 and lb[(failed_method, "tn")].gate_failures == 1
    assert lb[(failed_method, "best")].gate_failures == 1
    sus_method, sus_shape, sus_layout = SUSPECT
    assert lb[(sus_method, sus_layout)].suspect == 1 and lb[(sus_method, sus_layout)].covered == 17
    # the suspect row's impossible time must not win best-of-layouts either
    best = sp[(sp["method"] == sus_method) & (sp["layout"] == "best") & (sp["shape"] == "_".join(map(str, sus_shape)))]
    assert best.iloc[0]["best_of"] == "tn"


def test_views_are_separate_and_host_metric_uses_host_time(run_a):
    _, _, off = view_speedups(run_a, "offline", "cold")
    _, _, srv = view_speedups(run_a, "server", "warm")
    assert srv[("search-a", "tn")].geomean == pytest.approx(0.55)
    assert off[("search-a", "tn")].geomean == pytest.approx(1.1)
    _, sp, _ = view_speedups(run_a, "offline", "cold", "host")
    r = sp[(sp["method"] == "search-a") & (sp["layout"] == "tn")].iloc[0]
    assert r["speedup"] == pytest.approx((r["base_us"]) / r["host_us_median"])
    assert r["base_us"] == pytest.approx(base_us((r["m"], r["n"], r["k"]), "tn") + 30.0)
    runs = build_runs(load_all([run_a])[1], BASELINE, "device")
    keys = [(v.mode, v.cache, v.metric) for v in runs[0].views]
    assert len(keys) == len(set(keys)) == 6  # 3 (mode, cache) pairs x 2 metrics


def test_speedups_never_pair_across_runs(tmp_path):
    """Run B is 10x slower overall; paired within each run, both runs score the same."""
    a = write_run(tmp_path / "a" / "results.parquet", run_id="run-a", gpu="GPU-1")
    b = write_run(tmp_path / "b" / "results.parquet", run_id="run-b", gpu="GPU-2", scale=10.0)
    _, df = load_all([a, b])
    # the pairing itself keys on run and GPU, even when handed rows of several runs at once
    raw = df[(df["mode"] == "offline") & (df["cache"] == "cold")]
    rows = with_best_of_layouts(raw, "device")
    sp = paired_speedups(rows, BASELINE, "device")
    assert len(sp) == len(rows)
    measured = sp[sp["layout"] != "best"]
    want = [true_speedup(m, lay, (mm, nn, kk), "offline") for m, lay, mm, nn, kk
            in zip(measured["method"], measured["layout"], measured["m"], measured["n"], measured["k"])]
    assert np.allclose(measured["speedup"], want)
    runs = build_runs(df, BASELINE, "device")
    assert len(runs) == 2
    scores = []
    for r in runs:
        v = next(v for v in r.views if (v.mode, v.cache, v.metric) == ("offline", "cold", "device"))
        scores.append({(e.method, e.layout): e.geomean for e in v.entries})
    assert scores[0].keys() == scores[1].keys()
    for key in scores[0]:
        assert scores[0][key] == pytest.approx(scores[1][key], rel=1e-6)


def test_throttled_rows_are_flagged_in_the_table(run_a):
    from reports.views import TABLE_COLUMNS

    runs = build_runs(load_all([run_a])[1], BASELINE, "device")
    v = next(v for v in runs[0].views if (v.mode, v.cache, v.metric) == ("offline", "cold", "device"))
    col = {c: i for i, c in enumerate(TABLE_COLUMNS)}
    flagged = [(r[col["m"]], r[col["n"]], r[col["k"]], r[col["method"]], r[col["layout"]])
               for r in v.table if "throttled" in r[col["flags"]]]
    method, (m, n, k), layout = THROTTLED
    assert (m, n, k, method, layout) in flagged
    assert all(f[3] == method and f[:3] == (m, n, k) for f in flagged)  # the row, and its best-layout copy


def test_bootstrap_ci_brackets_and_narrows():
    rng = np.random.default_rng(1)
    small = np.exp(rng.normal(0.1, 0.3, 10))
    big = np.exp(rng.normal(0.1, 0.3, 1000))
    lo_s, hi_s = geomean_ci(small)
    lo_b, hi_b = geomean_ci(big)
    assert lo_s < geomean(small) < hi_s and lo_b < geomean(big) < hi_b
    assert hi_b - lo_b < hi_s - lo_s
    assert all(math.isnan(v) for v in geomean_ci([1.5]))  # one shape: no interval, not [1.5, 1.5]


def test_too_few_rounds_or_shapes_show_no_ci(tmp_path):
    """A row of 3 rounds (whose file still holds the min-max of its rounds as a 'CI') shows no
    median CI and says why; a leaderboard over 2 shapes shows no geomean CI and says why."""
    store = ResultStore(tmp_path / "few.parquet", "run-few")
    for i, shape in enumerate([(128, 128, 256), (128, 1024, 256)]):
        rows = []
        for method in (BASELINE, "search-a"):
            t = base_us(shape, "nn") / true_speedup(method, "nn", shape, "offline")
            r = make_row("run-few", "GPU-1", shape, "nn", method, "offline", "warm", t, i)
            r.update(rounds=3, stop_reason="budget")
            rows.append(r)
        store.add_group(rows, [])
    from reports.views import build_runs

    _, df = load_all([tmp_path / "few.parquet"])
    (run,) = build_runs(df, BASELINE, "device")
    view = next(v for v in run.views if v.metric == "device")
    from reports.views import TABLE_COLUMNS as cols
    for row in view.table:
        r = dict(zip(cols, row))
        assert r["ci_lo"] is None and r["ci_hi"] is None and "no 95% CI (3 rounds; it needs 6)" in r["flags"]
    _, data = site_runs(build_site([tmp_path / "few.parquet"], tmp_path / "site"))
    (entry,) = [e for e in data["r0"]["views"][0]["entries"] if (e["method"], e["layout"]) == ("search-a", "nn")]
    assert entry["ci_long"] == "no 95% CI: 2 shape(s), it needs 6" and entry["ci"] == "no CI (2 < 6 shapes)"


def test_baseline_fallback_is_announced(run_a):
    """An unmeasured or never-rankable baseline falls back to one that ran, and the page says so."""
    _, df = load_all([run_a])
    v = build_runs(df, "no-such-method", "device")[0].views[0]
    assert v.baseline == BASELINE and "no-such-method" in v.baseline_note
    # as on a CPU run: the requested baseline exists but every row of it is unsupported
    df.loc[df["method"] == BASELINE, "status"] = "unsupported"
    v = build_runs(df, BASELINE, "device")[0].views[0]
    assert v.baseline == "cublas" and "no rankable rows" in v.baseline_note
    assert all(e.method != BASELINE for e in v.entries)  # listed under "not run" instead


# --- bad inputs ---------------------------------------------------------------------------------

def test_missing_file_is_a_clear_error(tmp_path):
    p = tmp_path / "nope.parquet"
    with pytest.raises(ResultsError, match="not found.*nope.parquet"):
        build_site([p], tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_a_baseline_no_file_holds_is_a_clear_error(run_a, tmp_path):
    """A mistyped --baseline would give a page without speedups: refused, naming the methods there are."""
    from reports.site import BaselineError

    with pytest.raises(BaselineError,
                       match="'cublaslt-autotun' is no method of these results; they hold .*cublaslt-autotune"):
        build_site([run_a], tmp_path / "site", baseline="cublaslt-autotun")
    assert not (tmp_path / "site").exists()


def test_foreign_parquet_is_rejected(tmp_path):
    p = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), p)
    with pytest.raises(ResultsError, match="other.parquet.*not an hgemm-bench results file"):
        build_site([p], tmp_path / "site")


def test_wrong_schema_version_is_rejected(run_a, tmp_path):
    t = pq.read_table(run_a)
    p = tmp_path / "old.parquet"
    pq.write_table(t.replace_schema_metadata({META_KEY: b"99"}), p)
    with pytest.raises(ResultsError, match="old.parquet.*version 99"):
        build_site([p], tmp_path / "site")


def test_empty_results_are_rejected(tmp_path):
    p = tmp_path / "empty.parquet"
    atomic_write_table(rows_to_table([], RESULT_SCHEMA).replace_schema_metadata(
        {META_KEY: str(SCHEMA_VERSION).encode()}), p)
    with pytest.raises(ResultsError, match="empty.parquet.*no result rows"):
        build_site([p], tmp_path / "site")


def test_not_parquet_is_rejected(tmp_path):
    p = tmp_path / "junk.parquet"
    p.write_text("hello")
    with pytest.raises(ResultsError, match="junk.parquet"):
        build_site([p], tmp_path / "site")


def test_same_measurement_in_two_files_is_rejected(run_a, tmp_path):
    b = tmp_path / "b" / "results.parquet"
    b.parent.mkdir()
    b.write_bytes(run_a.read_bytes())
    with pytest.raises(ResultsError, match="appears twice"):
        build_site([run_a, b], tmp_path / "site")


# --- the site ------------------------------------------------------------------------------------

def test_site_is_self_contained_with_data(run_a, tmp_path):
    cpu = write_run(tmp_path / "c" / "results.parquet", run_id="run-cpu", device="cpu",
                    modes=(("offline", "warm"),))
    index = build_site([run_a, cpu], tmp_path / "site")
    html = index.read_text()
    # no CDN or any network fetch: every src/href is relative or an in-page anchor
    import re
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(not r.startswith(("http:", "https:", "//")) for r in refs)
    for r in refs:
        if not r.startswith("#"):
            assert (index.parent / r).exists(), r
    for name in ("app.js", "table.js", "charts.js", "report.css", "vendor/vega.min.js", "vendor/vega-lite.min.js",
                 "vendor/vega-embed.min.js", "vendor/LICENSE.vega", "vendor/LICENSE.vega-lite",
                 "vendor/LICENSE.vega-embed"):
        assert (index.parent / "static" / name).is_file(), name
    copied = list((index.parent / "data").rglob("results.parquet"))
    assert len(copied) == 2
    # run-a: 3 (mode, cache) x 18 shapes; CPU run: 18
    assert len(list((index.parent / "data").rglob("*.samples/*.parquet"))) == 18 * 3 + 18
    site, runs = site_runs(index)
    assert [r["file"] for r in site["runs"]] == ["data/r0.js", "data/r1.js"]
    gpu, cpu_run = runs["r0"], runs["r1"]
    assert cpu_run["cpu"] and "CPU results" in cpu_run["label"] and not gpu["cpu"]
    assert site["headline"] == "r0" and site["meta"]["floor"].startswith("floor = max(2·M·N·K / peak")
    assert all(v["entries"] for v in gpu["views"])
    assert any("rel_fro 0.2 > tol" in x["why"] for x in gpu["excluded"])  # the gate failure, with its reason
    for r in runs.values():  # each run's download links point at its own copied files
        assert r["downloads"] and all((index.parent / d["href"]).is_file() for d in r["downloads"])
        assert all(d["schema_version"] == SCHEMA_VERSION for d in r["downloads"])  # the file's own version


def test_site_can_be_rebuilt_from_its_own_data(run_a, tmp_path):
    """The copied Parquet files are complete inputs: rebuilding from them in place loses nothing."""
    site = tmp_path / "site"
    _, first = site_runs(build_site([run_a], site))
    copy = next((site / "data").rglob("results.parquet"))
    build_site([copy], site)
    again = next((site / "data").rglob("results.parquet"))
    assert again.read_bytes() == run_a.read_bytes()
    assert len(list((site / "data").rglob("*.samples/*.parquet"))) == 18 * 3
    _, second = site_runs(site / "index.html")
    assert [v["entries"] for v in first["r0"]["views"]] == [v["entries"] for v in second["r0"]["views"]]


# --- the output folder: the report writes only files it owns ---------------------------------------

def _files(d: Path) -> set[str]:
    return {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}


def test_site_folder_lists_what_it_wrote_and_a_rebuild_touches_nothing_else(run_a, tmp_path):
    import json

    from reports.site import MANIFEST

    site = tmp_path / "site"
    build_site([run_a], site)
    owned = set(json.loads((site / MANIFEST).read_text())["files"])
    assert owned == _files(site) - {MANIFEST} and "index.html" in owned and "static/app.js" in owned
    # a file of the user's, next to and among the report's own
    (site / "data" / "important.csv").write_text("keep me")
    (site / "notes.txt").write_text("mine")
    other = write_run(tmp_path / "b" / "other.parquet", run_id="run-b", modes=(("offline", "warm"),))
    build_site([other], site)
    assert (site / "data" / "important.csv").read_text() == "keep me" and (site / "notes.txt").read_text() == "mine"
    now = set(json.loads((site / MANIFEST).read_text())["files"])
    assert not any(f.startswith("data/0-results/") for f in now), "the first build's data copies are replaced"
    assert _files(site) == now | {MANIFEST, "data/important.csv", "notes.txt"}
    assert not (site / "data" / "0-results").exists()  # the folder it made and emptied is gone too


def test_a_folder_the_report_did_not_make_is_refused_untouched(run_a, tmp_path):
    from harness.paths import OutputPathError

    theirs = tmp_path / "theirs"
    (theirs / "data").mkdir(parents=True)
    (theirs / "data" / "important.csv").write_text("keep me")
    with pytest.raises(OutputPathError, match="not empty and was not made by"):
        build_site([run_a], theirs)
    assert _files(theirs) == {"data/important.csv"}
    empty = tmp_path / "empty"
    empty.mkdir()
    build_site([run_a], empty)  # an empty folder is fine
    assert (empty / "index.html").exists()


def test_a_file_of_the_users_where_the_report_would_write_stops_the_build(run_a, tmp_path):
    from harness.paths import OutputPathError
    from reports.site import MANIFEST

    site = tmp_path / "site"
    build_site([run_a], site)
    before = (site / MANIFEST).read_text()
    other = write_run(tmp_path / "b" / "other.parquet", run_id="run-b", modes=(("offline", "warm"),))
    (site / "data" / "1-other").mkdir()
    (site / "data" / "1-other" / "other.parquet").write_text("the user's")
    with pytest.raises(OutputPathError, match="exists and was not written by"):
        build_site([run_a, other], site)
    assert (site / "data" / "1-other" / "other.parquet").read_text() == "the user's"
    assert (site / MANIFEST).read_text() == before and (site / "index.html").exists()
    assert not list(site.glob(".report-stage-*"))


@pytest.mark.parametrize("files", [["../outside.txt"], ["/etc/hostname"], "not a list"])
def test_a_manifest_pointing_outside_the_folder_is_not_trusted(run_a, tmp_path, files):
    import json

    from harness.paths import OutputPathError
    from reports.site import MANIFEST

    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "outside.txt").write_text("keep")
    (site / MANIFEST).write_text(json.dumps({"written_by": "hgemm-bench report", "files": files}))
    with pytest.raises(OutputPathError, match="manifest"):
        build_site([run_a], site)
    assert (tmp_path / "outside.txt").read_text() == "keep"
