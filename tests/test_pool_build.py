"""``hgemm-bench build``: the pool compiles once into the build cache, a rerun builds nothing.

A fake nvcc (``$HGEMM_NVCC``, a shell script that writes the library file) stands in for the CUDA
compiler, so the command's real path runs on a CPU-only CI: the pool's definition, binaries shared by
configs that differ only in runtime options, cache hits, ``--dry-run``'s counts and the plain lines a
pipe gets. Why these can fail: a pool that lists one config twice or builds a shared binary twice, a
rerun that compiles again, a dry run that compiles, a build cache other than the one searches read.
"""

from __future__ import annotations

import stat

from typer.testing import CliRunner

from harness.cli import app
from kernels_search import build as build_mod
from kernels_search import user_dirs
from kernels_search.search import pool
from kernels_search.search.settings import PoolSettings

FAKE_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake nvcc, release 0.0"; exit 0; fi
echo "$@" >> "{calls}"
out=""; prev=""
for a in "$@"; do if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"; done
echo fake > "$out"
"""


def fake_nvcc(tmp_path, monkeypatch, script: str = FAKE_NVCC):
    """Put a shell ``nvcc`` (``script``, its ``{calls}`` the file it logs its arguments to) where the
    build pipeline looks, with a build cache of its own; returns the log's path."""
    calls = tmp_path / "calls.txt"
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(script.format(calls=calls))
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("HGEMM_NVCC", str(nvcc))
    monkeypatch.setenv("HGEMM_BUILD_NICE", "0")
    monkeypatch.setenv("HGEMM_BUILD_CACHE", str(tmp_path / "cache"))
    return calls


def test_the_build_cache_defaults_to_the_xdg_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("HGEMM_BUILD_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_mod.cache_dir() == tmp_path / "xdg" / "hgemm-bench" / "build"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert build_mod.cache_dir() == user_dirs.Path.home() / ".cache" / "hgemm-bench" / "build"
    monkeypatch.setenv("HGEMM_BUILD_CACHE", str(tmp_path / "mine"))
    assert build_mod.cache_dir() == tmp_path / "mine"


def test_the_pool_is_presets_and_library_kernels_once_grouped_by_binary():
    specs = pool.specs(PoolSettings(families=("splitk_tma", "smalltile")))
    assert len(specs) == len(set(specs)) and specs
    assert {s.partition(":")[0] for s in specs} == {"splitk_tma", "smalltile"}
    presets_only = pool.specs(PoolSettings(families=("splitk_tma",), library=False))
    assert len(presets_only) == len(pool.cuda_families(["splitk_tma"])["splitk_tma"].presets)
    bins = pool.binaries(specs)
    assert sum(len(b.specs) for b in bins) == len(specs)
    # splitk_tma's slice count is a runtime option: configs differing only there share a binary
    assert len(bins) < len(specs)


def test_build_compiles_each_binary_once_and_a_rerun_is_all_cache_hits(tmp_path, monkeypatch):
    calls = fake_nvcc(tmp_path, monkeypatch)
    runner = CliRunner()
    fams = ["--families", "splitk_tma,smalltile"]
    n_bins = len(pool.binaries(pool.specs(PoolSettings(families=("splitk_tma", "smalltile")))))

    dry = runner.invoke(app, ["build", "--dry-run", *fams])
    assert dry.exit_code == 0, dry.output
    assert f"pool: {n_bins} binaries" in dry.output and "0 cached" in dry.output
    assert not calls.exists()  # a dry run compiles nothing

    got = runner.invoke(app, ["build", "--jobs", "2", *fams])
    assert got.exit_code == 0, got.output
    assert len(calls.read_text().splitlines()) == n_bins
    assert f"[{n_bins}/{n_bins}] built" in got.output  # one plain line per binary (not a terminal)
    assert f"built {n_bins} of {n_bins} binaries" in got.output

    again = runner.invoke(app, ["build", *fams])
    assert again.exit_code == 0 and f"{n_bins} cached" in again.output and "0 to build" in again.output
    assert len(calls.read_text().splitlines()) == n_bins  # nothing compiled twice
    assert all(pool.is_built(b) for b in pool.binaries(pool.specs(PoolSettings(families=("smalltile",)))))


def test_build_rejects_a_family_that_is_not_cuda():
    got = CliRunner().invoke(app, ["build", "--dry-run", "--families", "triton"])
    assert got.exit_code == 2 and "not a CUDA family" in got.output
