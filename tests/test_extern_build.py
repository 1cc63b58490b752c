"""Parallel prebuilds of a ``--kernels-dir`` (kernels_search/extern_build.py, ``build --kernels-dir``).

Why: a compare prepares its methods one at a time in its sandbox worker; a directory of PyTorch-extension
kernels built there compiles one after another while the host's other cores idle, and a 10-minute run
spends its time compiling. The prebuild must build every file at once, leave each build where a prepare
looks (so the prepare only loads), skip what is built, and turn a broken file into its reason (recorded,
so it is not compiled again), never a crash. The extension path runs here for real with C++-only modules
through the same loader (``ExtBuild``); a fake nvcc (``$HGEMM_NVCC``) stands in for the C-ABI compiler.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from harness.cli import app
from kernels_search import extern, extern_build
from kernels_search.extern import ExtBuild, TorchExtMethod
from test_pool_build import fake_nvcc

ROOT = Path(__file__).resolve().parents[1]

KERNEL = """\
#include <cstdint>
int64_t twice(int64_t x) { return 2 * x; }
"""
BROKEN = """\
#include <cstdint>
int64_t twice(int64_t x) { return 2 * no_such_name_here; }
"""
BINDING = """\
#include <pybind11/pybind11.h>
#include <cstdint>
int64_t twice(int64_t x);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice, "twice"); }
"""


class CppExt(TorchExtMethod):
    """A PyTorch-extension method whose build is a given ``ExtBuild`` (C++ only: no CUDA needed)."""

    def __init__(self, name: str, build: ExtBuild):
        self.name = name
        self._build = build

    def ext_build(self) -> ExtBuild:
        return self._build


def _ext(tmp_path: Path, name: str, kernel: str) -> ExtBuild:
    return ExtBuild(name, tmp_path / name, {"kern.cpp": kernel, "binding.cpp": BINDING}, (), "9.0a")


needs_ninja = pytest.mark.skipif(
    not __import__("torch.utils.cpp_extension", fromlist=["x"]).is_ninja_available(),
    reason="torch.utils.cpp_extension needs ninja (pip install ninja)")


@needs_ninja
@pytest.mark.slow
def test_two_extensions_build_in_parallel_a_broken_one_gives_its_reason_and_a_rerun_compiles_nothing(tmp_path):
    good = CppExt("ext:good", _ext(tmp_path, "hgemm_prebuild_good", KERNEL))
    bad = CppExt("ext:bad", _ext(tmp_path, "hgemm_prebuild_bad", BROKEN))
    seen = []
    first = extern_build.prebuild([good, bad], workers=2,
                                  done=lambda r: seen.append((r.method, threading.current_thread())))
    assert [r.method for r in first] == ["ext:good", "ext:bad"]
    assert sorted(m for m, _ in seen) == ["ext:bad", "ext:good"]
    assert all(t is threading.main_thread() for _, t in seen)  # done() runs in the calling thread
    ok, broken = first
    assert ok.ok and not ok.cached and good.ext_build().is_built(), ok.reason
    assert not broken.ok and not broken.cached and "no_such_name_here" in broken.reason
    assert bad.ext_build().failure() is not None  # recorded next to the build
    # the builds ran in children: this process never loaded a kernel's code
    assert "hgemm_prebuild_good" not in sys.modules
    built = {p.name: p.stat().st_mtime_ns for p in good.ext_build().build_dir.iterdir()}

    again = extern_build.prebuild([good, bad], workers=2)
    assert again[0].ok and again[0].cached and again[0].seconds < 2.0
    assert not again[1].ok and again[1].cached and "no_such_name_here" in again[1].reason
    assert {p.name: p.stat().st_mtime_ns for p in good.ext_build().build_dir.iterdir()} == built, "rebuilt"

    # a later process loads the prebuilt module without compiling, and reports the recorded failure
    code = ("import sys, time; from kernels_search.extern import ExtBuild, ExtBuildError\n"
            "g = ExtBuild.from_json(open(sys.argv[1]).read()); t0 = time.perf_counter(); m = g.load()\n"
            "print(m.twice(21), round(time.perf_counter() - t0, 3))\n"
            "try:\n    ExtBuild.from_json(open(sys.argv[2]).read()).load()\n"
            "except ExtBuildError as e:\n    print('recorded' if 'delete it to build again' in str(e) else str(e))\n")
    (tmp_path / "good.json").write_text(good.ext_build().to_json())
    (tmp_path / "bad.json").write_text(bad.ext_build().to_json())
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "good.json"), str(tmp_path / "bad.json")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    answer, load_s, recorded = out.stdout.split()
    assert answer == "42" and float(load_s) < 2.0 and recorded == "recorded", out.stdout


def test_a_build_stopped_by_its_timeout_leaves_no_lock_and_no_recorded_failure(tmp_path):
    """cpp_extension waits for ever on a build dir's lock file: a killed build must not leave one."""
    b = _ext(tmp_path, "hgemm_prebuild_killed", KERNEL)
    b.build_dir.mkdir(parents=True)
    (b.build_dir / extern_build.BATON).write_text("")  # as a build killed mid-way leaves it: the child waits on it
    ok, cached, reason = extern_build.build_ext(b, timeout_s=3.0)
    assert not ok and not cached and "timed out" in reason
    assert not (b.build_dir / extern_build.BATON).exists() and b.failure() is None


def test_prebuild_runs_the_builds_at_once(monkeypatch):
    """Two builds that each wait for the other finish only when they run at the same time."""
    both = threading.Barrier(2, timeout=20)

    def build_one(method, timeout_s):
        both.wait()
        return extern_build.Prebuilt(method, True, False, 0.0)

    monkeypatch.setattr(extern_build, "_build_one", build_one)
    got = extern_build.prebuild(["a", "b"], workers=2)
    assert [r.method for r in got] == ["a", "b"] and all(r.ok for r in got)


def test_the_extension_build_is_the_one_a_prepare_loads(tmp_path, monkeypatch):
    """``ext_build`` names the build by content, flags and target arch: a prepare (``build_kernel``)
    and the prebuild reach the same directory, and another arch list never reuses it."""
    _fake_nvcc(tmp_path, monkeypatch)
    (tmp_path / "k").mkdir()
    src = tmp_path / "k" / "l2.cu"
    src.write_text("#include <torch/extension.h>\n"
                   "void f(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c) {}\n")
    (m,) = extern.load_kernels_dir(tmp_path / "k")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    b = m.ext_build()
    assert b.arch_list == extern.DEFAULT_ARCH_LIST and set(b.files) == {"l2.cu", "binding.cpp"}
    assert b.build_dir.parent.parent == tmp_path / "cache" / "ext"
    seen = []
    monkeypatch.setattr(ExtBuild, "load", lambda self: seen.append(self.build_dir) or SimpleNamespace(f="kernel f"))
    assert m.build_kernel() == "kernel f" and seen == [b.build_dir]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert m.ext_build().build_dir != b.build_dir


# ---- build --kernels-dir, C-ABI files through a fake nvcc ----------------------------------------------

FAKE_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake nvcc, release 0.0"; exit 0; fi
echo "$@" >> "{calls}"
if grep -q BROKEN kernel.cu; then echo "kernel.cu(4): error: BROKEN on purpose"; exit 2; fi
out=""; prev=""
for a in "$@"; do if [ "$prev" = "-o" ]; then out="$a"; fi; prev="$a"; done
echo fake > "$out"
"""
ABI = """\
#include <cuda_runtime.h>
extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }
extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* ws, size_t ws_bytes, cudaStream_t stream) { return 0; }
"""


def _fake_nvcc(tmp_path, monkeypatch) -> Path:
    return fake_nvcc(tmp_path, monkeypatch, FAKE_NVCC)


def _abi_dir(tmp_path) -> Path:
    d = tmp_path / "kernels"
    d.mkdir()
    (d / "good.cu").write_text(ABI)
    (d / "other.cu").write_text(ABI + "// another file\n")
    (d / "broken.cu").write_text(ABI + "// BROKEN\n")
    return d


def _compiles(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_build_kernels_dir_builds_every_file_reports_a_broken_one_and_a_rerun_compiles_nothing(tmp_path, monkeypatch):
    calls = _fake_nvcc(tmp_path, monkeypatch)
    d = _abi_dir(tmp_path)
    runner = CliRunner()

    dry = runner.invoke(app, ["build", "--kernels-dir", str(d), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "3 files; 0 built" in dry.output and "build   cu:broken" in dry.output
    assert _compiles(calls) == 0  # a dry run compiles nothing

    got = runner.invoke(app, ["build", "--kernels-dir", str(d), "--jobs", "3"])
    assert got.exit_code == 1, got.output  # one file failed
    assert _compiles(calls) == 3
    assert "built cu:good" in got.output and "built cu:other" in got.output
    assert "FAILED cu:broken" in got.output and "BROKEN on purpose" in got.output
    assert "[3/3]" in got.output and "1 failed" in got.output

    again = runner.invoke(app, ["build", "--kernels-dir", str(d)])
    assert _compiles(calls) == 3  # nothing compiled twice, the failure included
    assert "3 built (or recorded as failed) before" in again.output and "cached cu:good" in again.output
    assert again.exit_code == 1 and "FAILED (recorded before) cu:broken" in again.output


def test_build_kernels_dir_refuses_a_file_it_cannot_use(tmp_path, monkeypatch):
    _fake_nvcc(tmp_path, monkeypatch)
    d = tmp_path / "kernels"
    d.mkdir()
    (d / "lonely.cu").write_text("__global__ void lonely(float* x) { x[0] = 1.f; }\n")
    got = CliRunner().invoke(app, ["build", "--kernels-dir", str(d)])
    assert got.exit_code == 2 and "lonely.cu" in got.output


def test_compares_prebuild_reports_each_build_and_then_nothing(tmp_path, monkeypatch):
    """The ``kernels-dir`` source's prebuild hook (what ``compare --kernels-dir`` calls on a GPU)."""
    from harness.registry import method_source

    calls = _fake_nvcc(tmp_path, monkeypatch)
    monkeypatch.delenv(extern.ENV_DIRS, raising=False)
    source = method_source("kernels-dir")
    specs = extern.register_kernels_dir(_abi_dir(tmp_path))
    lines: list[str] = []
    source.prebuild(specs, lines.append)
    assert lines[0].startswith("building 3 of 3 kernels-dir files")
    assert sum(" built cu:" in ln for ln in lines) == 2 and sum("FAILED cu:broken" in ln for ln in lines) == 1
    assert "1 failed" in lines[-1] and _compiles(calls) == 3
    lines.clear()
    source.prebuild(specs, lines.append)
    assert lines == [] and _compiles(calls) == 3
