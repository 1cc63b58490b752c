"""CPU tests of what the site is built from: readable run names, shape classes, the headline
run, the cross-run leaderboard, and the report command's --headline."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.results import ResultStore
from reports import build_site
from reports.crossrun import MIN_SHAPES, cross_run
from reports.headline import HeadlineError
from reports.load import load_all
from reports.runname import name_from_path
from reports.shapeclass import shape_class
from reports.views import build_runs
from sitefiles import site_runs
from test_report import base_us, make_row

FULL = ["cublaslt-autotune", "cublas", "cublaslt", "torch"]
SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (128, 128, 128), (256, 512, 256), (1024, 1024, 1024),
          (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 4096)]


def ratio(method: str, shape) -> float:
    """baseline / method, per method and shape (what the synthetic times are built from)."""
    if method == "cublaslt-autotune":
        return 1.0
    if method.startswith("lib"):
        return 1.2 if min(shape[:2]) <= 64 else 0.9
    return {"cublas": 0.95, "cublaslt": 0.97, "torch": 0.9}.get(method, 1.5)


ORIGINS = {(1, 4096, 4096): ("Llama-3.1-8B", "o_proj"), (16, 4096, 4096): ("Llama-3.1-8B", "o_proj")}


def write(path: Path, run_id: str, methods, start: int, shapes=SHAPES, label: str | None = None) -> Path:
    """One offline/warm GPU run; ``start`` orders runs in time (its rows' measured_at). The two
    decode shapes are recorded as a model's layer (ORIGINS)."""
    store = ResultStore(path, run_id)
    i = start
    for shape in shapes:
        rows = []
        for method in methods:
            for layout in ("nn", "tn"):
                r = make_row(run_id, "GPU-1", shape, layout, method, "offline", "warm",
                             base_us(shape, "nn") / ratio(method, shape), i)
                model, layer = ORIGINS.get(shape, (None, None))
                r.update(is_baseline=method in FULL, family="baseline" if method in FULL else "lib",
                         run_label=label, source_model=model, source_layer=layer)
                rows.append(r)
                i += 1
        store.add_group(rows, [])
    return path


def test_run_names_from_labels_and_file_names(tmp_path):
    assert name_from_path(Path("results/runs/14-h200-search-g-library/h200-search-g-library.parquet")) == \
        "h200 search g library"
    assert name_from_path(Path("results/27-fresh_shapes/results.parquet")) == "fresh shapes"
    p = write(tmp_path / "a" / "compare.parquet", "run-a", FULL, 0, SHAPES[:2])
    q = write(tmp_path / "b" / "x.parquet", "run-b", FULL, 100, SHAPES[:2], label="decode GEMMs, Llama")
    files, df = load_all([p, q])
    runs = {r.run_id: r for r in build_runs(df, "cublaslt-autotune", "device", [f.path for f in files])}
    assert runs["run-a"].name == "a" and runs["run-b"].name == "decode GEMMs, Llama"
    assert runs["run-b"].label.startswith("decode GEMMs, Llama · NVIDIA H200 · 2026-11-30")


def test_shape_classes():
    assert [shape_class(*s) for s in SHAPES] == ["skinny", "skinny", "small", "small", "medium", "medium", "large",
                                                 "large"]
    assert shape_class(4096, 64, 8192) == "skinny" and shape_class(65, 65, 65) == "small"


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    old_full = write(d / "1-old-full" / "old-full.parquet", "run-old", FULL + ["lib-a", "lib-b"], 0)
    new_full = write(d / "2-new-full" / "new-full.parquet", "run-new", FULL + ["lib-a"], 200, SHAPES[:6])
    # the newest run: a study against one baseline (not a full comparison), a config on 2 shapes
    study = write(d / "3-study" / "study.parquet", "run-study", ["cublaslt-autotune", "lucky-config"], 400, SHAPES[:2])
    return [old_full, new_full, study]


def test_the_site_opens_on_the_latest_full_comparison(three_runs, tmp_path):
    index, runs = site_runs(build_site(three_runs, tmp_path / "site"))
    lead = runs[index["headline"]]
    assert lead["run_id"] == "run-new" and lead["name"] == "new full"
    assert [r["full"] for r in index["runs"]] == [False, True, True]  # newest first
    assert index["headline_chosen"] is False  # the page says "the latest full comparison"
    asked, _ = site_runs(build_site(three_runs, tmp_path / "site2", headline="study"))
    assert next(r for r in asked["runs"] if r["id"] == asked["headline"])["run_id"] == "run-study"
    assert asked["headline_chosen"] is True  # the page says "the run chosen for this site"
    with pytest.raises(HeadlineError, match="matches no run"):
        build_site(three_runs, tmp_path / "site3", headline="nope")
    assert not (tmp_path / "site3").exists()


def test_report_command_takes_headline_and_refuses_an_unknown_one(three_runs, tmp_path):
    cmd = [sys.executable, "-c", "from harness.cli import main; main()", "report", *map(str, three_runs),
           "-o", str(tmp_path / "site"), "--headline", "run-old"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index, runs = site_runs(tmp_path / "site" / "index.html")
    assert runs[index["headline"]]["run_id"] == "run-old"
    bad = subprocess.run(cmd[:-1] + ["no-such-run"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "matches no run" in bad.stdout + bad.stderr


def test_cross_run_board_scores_each_method_in_its_latest_run(three_runs):
    files, df = load_all(three_runs)
    runs = build_runs(df, "cublaslt-autotune", "device", [f.path for f in files])
    board = {b["method"]: b for b in cross_run(runs, "cublaslt-autotune")}
    assert "cublaslt-autotune" not in board
    assert board["lib-a"]["run_id"] == "run-new" and board["lib-a"]["shapes"] == 6  # newer than run-old
    assert board["lib-b"]["run_id"] == "run-old" and board["lib-b"]["shapes"] == 8  # only run-old has it
    assert board["lucky-config"]["run_id"] == "run-study"
    # per class, from the ratios the times were built from (best layout: nn and tn are equal here)
    want = {"skinny": 1.2, "small": 0.9, "medium": 0.9}
    for cls, v in want.items():
        assert board["lib-a"][cls] == pytest.approx(v, rel=1e-3)
    assert board["lib-a"]["large"] is None and board["lib-b"]["large"] == pytest.approx(0.9, rel=1e-3)
    assert board["lib-a"]["geomean"] == pytest.approx(math.exp(np.mean(np.log([1.2] * 2 + [0.9] * 4))), rel=1e-3)
    assert board["lib-a"]["skinny_n"] == 2 and board["lib-a"]["win_rate"] == pytest.approx(2 / 6, rel=1e-3)
    # a config measured on 2 shapes scores 1.5x but is listed after every method with a CI
    order = [b["method"] for b in cross_run(runs, "cublaslt-autotune")]
    assert board["lucky-config"]["geomean"] == pytest.approx(1.5) and not board["lucky-config"]["ranked"]
    assert order[-1] == "lucky-config" and board["lucky-config"]["ci_lo"] is None
    assert all(board[m]["ranked"] and board[m]["ci_lo"] is not None for m in order[:-1])
    assert MIN_SHAPES == 6


def test_run_leaderboard_lists_methods_without_a_ci_after_the_rest(three_runs, tmp_path):
    """In the study run, a config tried on 2 shapes at 1.5x is listed after the baseline it beat."""
    index, runs = site_runs(build_site(three_runs, tmp_path / "site"))
    study = next(r for r in runs.values() if r["run_id"] == "run-study")
    best = [e for e in study["views"][0]["entries"] if e["layout"] == "best"]
    assert [(e["method"], e["rank"], e["ranked"]) for e in best] == [("cublaslt-autotune", 1, True),
                                                                     ("lucky-config", 2, False)]
    assert best[1]["geomean"] == pytest.approx(1.5) and best[1]["ci"] == "no CI (2 < 6 shapes)"
    full = next(r for r in runs.values() if r["run_id"] == "run-old")
    ranks = [e["geomean"] for e in full["views"][0]["entries"] if e["layout"] == "best"]
    assert ranks == sorted(ranks, reverse=True)  # all on 8 shapes: by speedup


def test_a_peer_is_tagged_and_its_compile_time_shown(tmp_path):
    """inductor rows (family peer, compile_s per shape): the run marks it a peer, not a baseline,
    and its leaderboard entries carry the median compile time; methods without one carry null."""
    store = ResultStore(tmp_path / "peer.parquet", "run-peer")
    for i, shape in enumerate(SHAPES[:3]):
        rows = []
        for method in ("cublaslt-autotune", "inductor"):
            r = make_row("run-peer", "GPU-1", shape, "nn", method, "offline", "warm", base_us(shape, "nn"), 2 * i)
            if method == "inductor":
                r.update(is_baseline=False, family="peer", compile_s=[30.0, 10.0, 20.0][i])
            rows.append(r)
        store.add_group(rows, [])
    _, runs = site_runs(build_site([tmp_path / "peer.parquet"], tmp_path / "site"))
    run = runs["r0"]
    assert run["roles"] == {"cublaslt-autotune": "baseline", "inductor": "peer"}
    entries = {(e["method"], e["layout"]): e for e in run["views"][0]["entries"]}
    assert entries[("inductor", "best")]["compile_s"] == 20.0 and entries[("inductor", "nn")]["compile_s"] == 20.0
    assert entries[("cublaslt-autotune", "best")]["compile_s"] is None
