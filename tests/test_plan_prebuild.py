"""scripts/plan_prebuild.py: a plan's CUDA binaries built ahead of its device call, the missing ones listed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kernels_search import toolchain

ROOT = Path(__file__).resolve().parents[1]
needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")


_spec = importlib.util.spec_from_file_location("plan_prebuild", ROOT / "scripts" / "plan_prebuild.py")
plan_prebuild = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plan_prebuild)


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
