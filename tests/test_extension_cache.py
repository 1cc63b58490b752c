"""Build caches hit across processes: an unchanged extension or family binary loads without compiling.

Why: ``--kernels-dir`` loads each PyTorch-extension kernel through ``torch.utils.cpp_extension`` and
ninja, which rebuilds any source newer than its outputs. A generated binding rewritten unchanged in
every new process made each load a full compile; a compare then spends its time recompiling. The
extension path is exercised on the CPU with a C++-only module through the same loader
(``kernels_search.extern.load_extension``); the family path with nvcc through the build cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernels_search import extern, toolchain

ROOT = Path(__file__).resolve().parents[1]
LOAD_S = 2.0  # what a second process may spend loading an unchanged build

KERNEL = """\
#include <cstdint>
int64_t twice(int64_t x) { return 2 * x; }
"""
BINDING = """\
#include <pybind11/pybind11.h>
#include <cstdint>
int64_t twice(int64_t x);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice, "twice"); }
"""

LOAD_EXTENSION = """\
import json, sys, time
from pathlib import Path
import torch  # a compare process has it loaded already: its import is not the extension's load time
from kernels_search.extern import load_extension
d = Path(sys.argv[1])
t0 = time.perf_counter()
mod = load_extension("hgemm_cache_probe_ext", d, {"kern.cpp": sys.argv[2], "binding.cpp": sys.argv[3]})
print(json.dumps({"load_s": time.perf_counter() - t0, "twice": mod.twice(21)}))
"""


def _run(code: str, *args: str, env: dict | None = None) -> dict:
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_write_if_changed_leaves_an_unchanged_file_alone(tmp_path):
    f = tmp_path / "binding.cpp"
    assert extern.write_if_changed(f, "a")
    os.utime(f, (1_000_000, 1_000_000))
    assert not extern.write_if_changed(f, "a") and f.stat().st_mtime == 1_000_000
    assert extern.write_if_changed(f, "b") and f.read_text() == "b"


@pytest.mark.slow
def test_an_unchanged_extension_loads_in_a_new_process_without_compiling(tmp_path):
    from torch.utils import cpp_extension

    if not cpp_extension.is_ninja_available():
        pytest.skip("torch.utils.cpp_extension needs ninja (pip install ninja)")
    d = tmp_path / "ext"
    first = _run(LOAD_EXTENSION, str(d), KERNEL, BINDING)
    assert first["twice"] == 42
    built = {p.name: p.stat().st_mtime_ns for p in d.iterdir() if p.suffix in (".o", ".so")}
    second = _run(LOAD_EXTENSION, str(d), KERNEL, BINDING)
    assert second["twice"] == 42
    assert {p.name: p.stat().st_mtime_ns for p in d.iterdir() if p.suffix in (".o", ".so")} == built, "rebuilt"
    assert second["load_s"] < LOAD_S, (first, second)
    print(f"extension: first process {first['load_s']:.1f} s (build), second {second['load_s']:.3f} s")


LOAD_FAMILY = """\
import json, sys, time
from kernels_search.raw_source import source_method
t0 = time.perf_counter()
r = source_method(sys.argv[1], "cu:cache_probe").build()
print(json.dumps({"load_s": time.perf_counter() - t0, "ok": r.ok, "cached": r.cached, "log": r.log[-2000:]}))
"""
ABI = """\
#include <cuda_runtime.h>
extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }
extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* ws, size_t ws_bytes, cudaStream_t stream) { return 0; }
"""


@pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")
def test_a_built_family_binary_loads_in_a_new_process_without_compiling(tmp_path):
    env = {"HGEMM_BUILD_CACHE": str(tmp_path / "cache")}
    first = _run(LOAD_FAMILY, ABI, env=env)
    assert first["ok"] and not first["cached"], first["log"]
    second = _run(LOAD_FAMILY, ABI, env=env)
    assert second["ok"] and second["cached"] and second["load_s"] < LOAD_S, (first, second)
    print(f"family binary: first process {first['load_s']:.1f} s (nvcc), second {second['load_s']:.3f} s")
