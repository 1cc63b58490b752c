"""GPU: a PyTorch-extension kernel with CUDA-L2's signature, loaded from a --kernels-dir, is
correct through the gate and the anti-cheat checks, in both layouts, on aligned and ragged
shapes, and its transposed copy of B runs inside the timed call.

Why: the loader is how external kernels (CUDA-L2's among them) enter a comparison. It must build
them (torch.utils.cpp_extension, binding generated), hand them both B operands correctly, and
put the cost of the copy the kernel needs on the kernel's clock. tests/extern_kernels/example_ext.cu
is our own kernel written to that signature.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch

from harness.anticheat import run_anticheat
from harness.gate import GateCandidate, run_gate
from harness.method import PrepareContext
from harness.problem import Problem, Shape
from harness.tensors import timing_sets
from harness.timing import time_candidates
from kernels_search import extern

pytestmark = pytest.mark.gpu
DIR = Path(__file__).resolve().parent / "extern_kernels"


@pytest.fixture(scope="module")
def method(tmp_path_factory):
    from torch.utils import cpp_extension

    if not cpp_extension.is_ninja_available():
        pytest.skip("torch.utils.cpp_extension needs ninja (pip install ninja)")
    mp = pytest.MonkeyPatch()
    mp.setenv("HGEMM_BUILD_CACHE", str(tmp_path_factory.mktemp("ext-cache")))  # a real build, not a stale one
    (m,) = extern.load_kernels_dir(DIR)
    assert m.name == "ext:example_ext" and isinstance(m, extern.TorchExtMethod)
    m.build_kernel()  # compile once for the module (raises ExtBuildError with the log on failure)
    yield m
    mp.undo()


def _prepare(m, problem):
    (st,) = timing_sets(problem, "cuda", 1, seed=0)
    ins = (st.a, st.b, st.c)
    return m.prepare(problem, PrepareContext("cuda", ins, partial(time_candidates, inputs=ins, device="cuda")))


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("shape", ["256_256_1024", "250_130_999", "64_2048_4096"])
def test_example_extension_passes_gate_and_anticheat(method, layout, shape):
    problem = Problem(Shape(*map(int, shape.split("_"))), layout)
    assert method.supports(problem, "cuda")
    prep = _prepare(method, problem)
    assert prep.capturable and prep.info["ext_function"] == "example_ext_hgemm"

    def anchor(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)

    res = run_gate(problem, [GateCandidate("torch", anchor, anchor=True), GateCandidate("ext", prep.fn)], "cuda",
                   seed=77)
    assert res["torch"].passed and res["ext"].passed, res["ext"].reason
    report = run_anticheat(problem, prep.fn, "cuda", prep.capturable,
                           make_probe_fn=lambda p: _prepare(method, p).fn, seed=5)
    assert report.passed, f"{report.reason} {report.figures()}"


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_transposed_copy_runs_on_the_timed_stream_every_call(method, layout):
    """Profile three calls. The example reads only b_col_major: in nn each call must run a copy
    kernel and the GEMM kernel on the GPU (the copy is not hoisted into prepare, and it is on the
    clock); in tn, where B is stored that way, the GEMM alone (no copy it would not read)."""
    from torch.profiler import ProfilerActivity, profile

    problem = Problem(Shape(256, 512, 768), layout)
    prep = _prepare(method, problem)
    (s,) = timing_sets(problem, "cuda", 1, seed=1)
    prep.fn(s.a, s.b, s.c)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            prep.fn(s.a, s.b, s.c)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    gemm = [n for n in names if "example_ext_kernel" in n]
    other = [n for n in names if "example_ext_kernel" not in n and "Memcpy" not in n and "Memset" not in n]
    assert len(gemm) == 3, names
    if layout == "nn":
        assert prep.info["ext_b_copy"] == "b_col_major"
        assert len(other) >= 3, f"no per-call copy kernel: {names}"
    else:
        assert prep.info["ext_b_copy"] == "none"
        assert other == [], f"a copy the kernel does not read: {names}"


def test_kernels_dir_through_the_sandbox(method, monkeypatch):
    """--kernels-dir in an isolated run: the worker process registers the same ext: names from
    the exported environment and measures the kernel next to torch.matmul."""
    sandbox = pytest.importorskip("harness.sandbox")
    from harness import env as envmod
    from harness.runner import CompareSettings

    monkeypatch.setenv(extern.ENV_DIRS, "")  # recorded, so the export is undone after the test
    assert extern.export_kernels_dirs([DIR]) == ["ext:example_ext"]
    settings = CompareSettings(shapes=[], layouts=["nn", "tn"], budget_s=0.5, min_rounds=3, seed=3)
    with sandbox.Evaluator("cuda", envmod.collect("cuda"), plugins=[extern.PLUGIN]) as ev:
        (rows, samples), = ev.evaluate_shape(Shape(256, 256, 1024), ["torch", "ext:example_ext"], settings,
                                             [("offline", "warm")], "ext")
    got = {(r["method"], r["layout"]): r for r in rows}
    for lay in ("nn", "tn"):
        r = got[("ext:example_ext", lay)]
        assert r["status"] == "ok", r.get("status_reason")
        assert r["device_us_median"] > 0
