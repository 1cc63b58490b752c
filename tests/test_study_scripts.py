"""CPU tests of the scripts around a registered study's device call: scripts/plan_prebuild.py (build a
plan's binaries ahead, list the missing ones) and scripts/study_table.py (what the plan measured)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from kernels_search import toolchain

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import plan_prebuild  # noqa: E402
import study_table  # noqa: E402

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")


@needs_nvcc
def test_plan_prebuild_counts_one_binary_per_config_and_lists_the_missing(tmp_path, monkeypatch, capsys):
    """Runtime-option variants (splitk's ``splits``) and a config planned on two shapes share one
    binary; baselines and Triton configs are not CUDA builds. Against an empty cache every binary is
    missing, and once one is in the cache under its key it is not."""
    monkeypatch.setenv("HGEMM_BUILD_CACHE", str(tmp_path / "cache"))
    a = "splitk:bm=32,bn=64,bk=64,warps_m=2,warps_n=2,splits=2"
    b = "smalltile:bm=16,bn=16,bk=32,warps_m=1,warps_n=1"
    plan = tmp_path / "plan.txt"
    plan.write_text(f"# a study\n64_64_256 {a},{a.replace('splits=2', 'splits=4')},cublas\n"
                    f"128_64_256 {b},{a}\n")
    methods = plan_prebuild.plan_methods([plan])
    assert sorted(m.name.split(":")[0] for m in methods.values()) == ["smalltile", "splitk"]
    assert all(lib.parent.parent.parent == tmp_path / "cache" and lib.name == "kernel.so" for lib in methods)
    assert plan_prebuild.main([str(plan), "--missing"]) == 0
    out = capsys.readouterr().out
    assert "2 CUDA binaries in 1 plan(s), 2 not built yet" in out and "smalltile:" in out
    first, second = methods
    first.parent.mkdir(parents=True)
    first.write_bytes(b"")
    assert first.exists() and not second.exists()
    plan_prebuild.main([str(plan), "--missing"])
    out = capsys.readouterr().out
    assert "1 not built yet" in out and methods[second].name in out and methods[first].name not in out


def test_study_table_takes_best_layouts_the_plans_first_config_and_sets_new_specs_apart():
    """Ratios are the baseline's best layout over each config's best layout in the same rows; the
    rank-1 column is the plan's first config, not the fastest; a gate failure is no row (left out of
    the best, and a rank-1 without a row is NaN, not a ratio); new configs compete only with new."""
    rows = [
        ("64_64_64", "cublaslt-autotune", "nn", "ok", 4.0), ("64_64_64", "cublaslt-autotune", "tn", "ok", 2.0),
        ("64_64_64", "k:a", "nn", "ok", 4.0), ("64_64_64", "k:a", "tn", "ok", 2.5),
        ("64_64_64", "k:new", "nn", "ok", 1.6), ("64_64_64", "k:b", "tn", "gate_failed", 0.5),
        ("128_64_64", "cublaslt-autotune", "nn", "ok", 3.0),
        ("128_64_64", "k:a", "nn", "gate_failed", 1.0), ("128_64_64", "k:new", "nn", "ok", 6.0),
        ("128_64_64", "k:b", "nn", "ok", 3.0),
        ("256_64_64", "k:a", "nn", "ok", 1.0),  # no baseline row: not a measured shape
    ]
    df = pd.DataFrame(rows, columns=["shape", "method", "layout", "status", "device_us_median"])
    r = study_table.ratios(df)
    assert r == {"64_64_64": {"k:a": 0.8, "k:new": 1.25}, "128_64_64": {"k:new": 0.5, "k:b": 1.0}}
    planned = {"64_64_64": ["k:a", "k:new", "k:b"], "128_64_64": ["k:a", "k:new", "k:b"], "256_64_64": ["k:a"]}
    lines = study_table.summarize(df, planned, {"k:new"}, per_shape=True)
    assert lines[0] == "2 of 3 planned shapes measured with cublaslt-autotune"
    assert lines[1].startswith("- rank-1 (first planned config): 0.800x") and lines[1].endswith("over 1")
    assert lines[2].startswith(f"- best planned config: {math.sqrt(1.25 * 1.0):.3f}x")
    assert lines[5].startswith(f"- best new over best other, per shape: {math.sqrt(1.25 / 0.8 * 0.5):.3f}x")
    assert lines[5].endswith("new faster on 1 of 2")
    assert "| 128_64_64 | nan | 1.000 | 0.500 | 1.000 | k:new |" in lines
