"""CPU tests of the --kernels-dir loaders (kernels_search/extern.py).

Why: a kernels dir is untrusted, hand-written input. Each file must be classified by what it is
(our C ABI, or a PyTorch extension with CUDA-L2's ``f(a, b, b_col_major, c)``), and anything
else must be refused naming the file, never skipped (a skipped kernel reads as a kernel that lost).
The transposed copy of B such an extension needs is not part of the problem contract, so it must
be made inside the timed call, on every call: a copy made once at prepare time would hide its cost
and would go stale when new values arrive in the same buffers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from harness import registry
from harness.gate import GateCandidate, run_gate
from harness.method import PrepareContext
from harness.problem import Problem, Shape
from kernels_search import extern, toolchain
from kernels_search.cuda_method import CudaKernelMethod

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "extern_kernels" / "example_ext.cu"
needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="nvcc not installed")

ABI = """\
#include "shared.cuh"
extern "C" size_t hgemm_workspace(int M, int N, int K, int layout, const int* opts, int n_opts) { return 0; }
extern "C" int hgemm_run(const void* A, const void* B, void* C, int M, int N, int K, int layout,
                         const int* opts, int n_opts, void* ws, size_t ws_bytes, cudaStream_t stream) {
  return shared_answer() == 0 ? 0 : 1;
}
"""
SHARED = """\
#pragma once
#include <cuda_runtime.h>
static inline int shared_answer() { return 0; }
"""
L2_STYLE = """\
#include <torch/extension.h>
__global__ void k(half* a) {}
void cuda_l2_h100_fp32(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c) {
  k<<<1, 1>>>(nullptr);
}
"""
WITH_PYBIND = """\
#include <torch/extension.h>
void helper(torch::Tensor a, torch::Tensor b, torch::Tensor b_col_major, torch::Tensor c) {}
void my_gemm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bcm, torch::Tensor& c) {
  helper(a, b, bcm, c);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &my_gemm, "gemm"); }
"""
NEITHER = """\
// mentions hgemm_run( only in a comment; nothing here is a kernel we can call
__global__ void lonely(float* x) { x[0] = 1.f; }
"""


def _dir(tmp_path: Path, files: dict[str, str]) -> Path:
    d = tmp_path / "kernels"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return d


GOOD = {"abi.cu": ABI, "shared.cuh": SHARED, "l2 style.cu": L2_STYLE, "bound.cu": WITH_PYBIND,
        "README.md": "not a kernel"}


def test_discovery_classifies_each_file_and_names_methods(tmp_path):
    d = _dir(tmp_path, GOOD)
    methods = extern.load_kernels_dir(d)
    by_name = {m.name: m for m in methods}
    assert sorted(by_name) == ["cu:abi", "ext:bound", "ext:l2_style"]  # headers and non-.cu files are no kernels
    assert isinstance(by_name["cu:abi"], CudaKernelMethod)
    l2, bound = by_name["ext:l2_style"], by_name["ext:bound"]
    assert isinstance(l2, extern.TorchExtMethod) and isinstance(bound, extern.TorchExtMethod)
    assert (l2.fn.name, l2.fn.export, l2.fn.has_pybind) == ("cuda_l2_h100_fp32", "cuda_l2_h100_fp32", False)
    assert (bound.fn.name, bound.fn.export, bound.fn.has_pybind) == ("my_gemm", "gemm", True)  # the bound one
    assert l2.default_stream and not bound.default_stream  # <<<1, 1>>> names no stream
    assert l2.source_hash != bound.source_hash
    # the C-ABI source carries the local header, so the build cache key covers it
    assert "shared_answer() { return 0; }" in by_name["cu:abi"].source


@pytest.mark.parametrize("bad,needle", [
    (NEITHER, "not a kernel this loader knows"),
    (ABI.replace("hgemm_workspace", "hgemm_ws"), "not hgemm_workspace"),
    (L2_STYLE + L2_STYLE.replace("cuda_l2_h100_fp32", "second_fn").replace("__global__ void k", "__global__ void k2"),
     "exactly one function"),
])
def test_unusable_file_is_an_error_naming_it(tmp_path, bad, needle):
    d = _dir(tmp_path, {**GOOD, "zz_bad.cu": bad})
    with pytest.raises(extern.ExternError) as e:
        extern.load_kernels_dir(d)
    msg = str(e.value)
    assert str(d / "zz_bad.cu") in msg and needle in msg
    assert str(d / "abi.cu") not in msg  # only the bad file is blamed


def test_empty_or_missing_dir_is_an_error(tmp_path):
    with pytest.raises(extern.ExternError, match="no .cu files"):
        extern.load_kernels_dir(_dir(tmp_path, {"x.cuh": SHARED}))
    with pytest.raises(extern.ExternError, match="not a directory"):
        extern.load_kernels_dir(tmp_path / "nope")


def test_inlining_follows_local_includes_once_and_keeps_line_numbers(tmp_path):
    d = _dir(tmp_path, {"a.cu": '#include "b.cuh"\n#include "c.cuh"\nint a_line3;\n',
                        "b.cuh": '#pragma once\n#include "c.cuh"\nint b;\n',
                        "c.cuh": "#pragma once\nint c;\n#include <vector>\n#include \"missing.h\"\n"})
    text = extern.inline_local_includes(d / "a.cu")
    assert text.count("int c;") == 1 and text.count("int b;") == 1
    assert "#include <vector>" in text and '#include "missing.h"' in text  # left for the compiler
    assert "#pragma once" not in text.replace("// #pragma once", "")
    assert str(tmp_path) not in text  # base names only: the cache key does not depend on the checkout path
    # what a compiler would report for each line, following the #line markers
    where, file, line = {}, "a.cu", 1
    for ln in text.split("\n"):
        if ln.startswith("#line "):
            _, num, name = ln.split(" ", 2)
            file, line = name.strip('"'), int(num)
            continue
        where[ln] = (file, line)
        line += 1
    assert where["int a_line3;"] == ("a.cu", 3)
    assert where["int b;"] == ("b.cuh", 3) and where["int c;"] == ("c.cuh", 2)


def test_cutlass_includes_get_cutlass_flags():
    """CUDA-L2's kernels include CuTe: without the -I flags their build could never succeed."""
    assert extern.cutlass_flags(ABI) == ()
    assert extern.cutlass_flags("// #include <cute/tensor.hpp>\n") == ()
    try:
        toolchain.cutlass_include_dirs()
    except toolchain.ToolchainError:
        pytest.skip("CUTLASS headers not installed")
    flags = extern.cutlass_flags("#include <cute/tensor.hpp>\n")
    assert flags and all(f.startswith("-I") or f.startswith("--") for f in flags)


def test_default_stream_heuristic():
    assert extern.launches_on_default_stream("k<<<g, b>>>(x);")
    assert extern.launches_on_default_stream("k<<<dim3(1, 2), b, smem>>>(x);")
    assert not extern.launches_on_default_stream("k<<<dim3(1, 2), b, smem, stream>>>(x);")
    assert not extern.launches_on_default_stream("// k<<<g, b>>>(x);\nk<<<g, b, 0, s>>>(x);")


def test_names_are_safe_identifiers_and_change_with_content():
    assert extern.method_stem("dir/1024_1024_1024.cu") == "1024_1024_1024"
    assert extern.method_stem("my kernel+v2.cu") == "my_kernel_v2"
    a = extern.ext_module_name("1024-1024 x", "ab" * 32)
    b = extern.ext_module_name("1024-1024 x", "cd" * 32)
    assert a.isidentifier() and b.isidentifier() and a != b


def test_generated_binding_declares_the_function_as_written():
    kind, _, fn = extern.classify(EXAMPLE)
    assert kind == extern.TORCH_EXT and fn.name == "example_ext_hgemm" and not fn.has_pybind
    src = extern.binding_source(fn)
    assert f"void example_ext_hgemm({fn.params});" in src and 'm.def("example_ext_hgemm"' in src
    _, _, bound = extern.classify(_write(WITH_PYBIND))
    assert bound.params.startswith("const torch::Tensor& a")


def _write(text: str) -> Path:
    import tempfile

    p = Path(tempfile.mkdtemp()) / "k.cu"
    p.write_text(text)
    return p


# ---- the transposition rule --------------------------------------------------------------------


class FakeKernel:
    """Stands in for a built extension: records what it was given and computes C from ONE operand
    (``use``), as a real kernel that reads only b or only b_col_major would."""

    def __init__(self, use: str):
        self.use = use
        self.calls: list[dict] = []

    def __call__(self, a, b, b_col_major, c):
        k, n = b.shape
        self.calls.append({"b": b, "bcm": b_col_major})
        assert b.shape == (k, n) and b_col_major.shape == (k, n)  # CUDA-L2's as_col_major keeps B's shape
        assert b.is_contiguous() and b_col_major.is_contiguous()
        bb = b if self.use == "b" else b_col_major.reshape(n, k).t()  # storage of B^T, row-major
        c.copy_((a.float() @ bb.float()).half())


def _ext_method(kernel) -> extern.TorchExtMethod:
    _, text, fn = extern.classify(EXAMPLE)
    return extern.TorchExtMethod(EXAMPLE, text, fn, kernel_loader=lambda m: kernel)


@pytest.mark.parametrize("layout", ["nn", "tn"])
@pytest.mark.parametrize("use", ["b", "b_col_major"])
def test_wrapper_passes_both_operands_correctly_and_passes_the_gate(layout, use):
    """Whichever operand a kernel reads, the wrapper's call is correct (CPU gate, new values in the
    same buffers on every draw: a copy made once would be caught as cached)."""
    kernel = FakeKernel(use)
    p = Problem(Shape(24, 40, 56), layout)
    prep = _ext_method(kernel).prepare(p, PrepareContext("cpu", (None, None, None), lambda fns: []))
    assert len(kernel.calls) == 2  # prepare tries the copying and the copy-free call once each
    # a copy is made only for the operand the kernel reads and the layout lacks
    lacks = "b_col_major" if layout == "nn" else "b"
    assert prep.info["ext_b_copy"] == (lacks if use == lacks else "none")
    kernel.calls.clear()

    def anchor(a, b, c):
        torch.matmul(a, b if layout == "nn" else b.t(), out=c)

    res = run_gate(p, [GateCandidate("ref", anchor, anchor=True), GateCandidate("ext", prep.fn)], "cpu", seed=4)
    assert res["ext"].passed, res["ext"].reason
    assert len(kernel.calls) == 3  # one call per draw, each with its own fresh copy


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_transposed_copy_is_made_inside_each_call(layout):
    """The operand the layout does not provide is a new tensor on every call, built from B's
    current values, for a kernel that reads it; the one it does provide is B's own storage."""
    kernel = FakeKernel("b_col_major" if layout == "nn" else "b")  # reads what the layout lacks
    p = Problem(Shape(8, 16, 32), layout)
    fn = _ext_method(kernel).prepare(p, PrepareContext("cpu", (None, None, None), lambda fns: [])).fn
    kernel.calls.clear()
    a = torch.randn(8, 32).half()
    b = torch.randn(*p.b_shape).half()
    c = torch.empty(8, 16, dtype=torch.half)
    fn(a, b, c)
    b.mul_(-2)  # new values, same buffer
    fn(a, b, c)
    first, second = kernel.calls
    given, made = ("b", "bcm") if layout == "nn" else ("bcm", "b")
    for call in (first, second):
        assert call[given].data_ptr() == b.data_ptr()  # handed over as stored
        assert call[made].data_ptr() != b.data_ptr()
    assert not torch.equal(first[made], second[made])  # the second call saw B's new values
    b_row = b if layout == "nn" else b.t()
    assert torch.equal(second["b"], b_row.contiguous())
    assert torch.equal(second["bcm"].reshape(-1), b_row.t().contiguous().reshape(-1))
    ref = (a.float() @ b_row.float()).half()
    assert torch.allclose(c.float(), ref.float(), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_a_kernel_reading_only_the_provided_operand_is_charged_no_copy(layout):
    """A kernel that reads only what the layout hands over gets views in place of the copy: no
    transpose inside its timed call (a user would store B the way it reads it)."""
    kernel = FakeKernel("b" if layout == "nn" else "b_col_major")
    p = Problem(Shape(8, 16, 32), layout)
    prep = _ext_method(kernel).prepare(p, PrepareContext("cpu", (None, None, None), lambda fns: []))
    assert prep.info["ext_b_copy"] == "none"
    kernel.calls.clear()
    a, b = torch.randn(8, 32).half(), torch.randn(*p.b_shape).half()
    c = torch.empty(8, 16, dtype=torch.half)
    prep.fn(a, b, c)
    (call,) = kernel.calls
    assert call["b"].data_ptr() == call["bcm"].data_ptr() == b.data_ptr()  # nothing copied
    ref = (a.float() @ (b if layout == "nn" else b.t()).float()).half()
    assert torch.allclose(c.float(), ref.float(), rtol=1e-3, atol=1e-2)


def test_default_stream_kernels_are_not_captured(tmp_path):
    """A kernel launching on the legacy default stream cannot be captured into a CUDA graph on
    another stream: the method says so and is timed with direct launches."""
    d = _dir(tmp_path, {"l2.cu": L2_STYLE})
    (m,) = extern.load_kernels_dir(d)
    m._kernel_loader = lambda _m: FakeKernel("b")
    prep = m.prepare(Problem(Shape(8, 8, 8), "nn"), PrepareContext("cpu", (None,) * 3, lambda f: []))
    assert prep.capturable is False and "default stream" in prep.info["ext_note"]
    assert not m.supports(Problem(Shape(8, 8, 8)), "cpu") and m.supports(Problem(Shape(8, 8, 8)), "cuda")


# ---- registration --------------------------------------------------------------------------------


def test_register_kernels_dir_makes_specs_resolvable(tmp_path):
    d = _dir(tmp_path, GOOD)
    names = extern.register_kernels_dir(d)
    assert sorted(names) == ["cu:abi", "ext:bound", "ext:l2_style"]
    got = registry.resolve(["cu:abi", "ext:l2_style"])
    assert [m.name for m in got] == ["cu:abi", "ext:l2_style"]
    assert {m.name for m in registry.resolve(["ext"])} >= {"ext:bound", "ext:l2_style"}
    with pytest.raises(registry.MethodSpecError, match="no ext kernel 'nope'"):
        registry.resolve(["ext:nope"])


def test_a_fresh_process_sees_the_exported_dirs(tmp_path, monkeypatch):
    """What a spawned sandbox worker does: import the plug-in with the parent's environment."""
    d = _dir(tmp_path, GOOD)
    monkeypatch.setenv(extern.ENV_DIRS, "")  # recorded, so the export below is undone after the test
    extern.export_kernels_dirs([d])
    assert os.environ[extern.ENV_DIRS] == str(d.resolve())
    code = ("import importlib; importlib.import_module(%r); from harness.registry import resolve; "
            "print(','.join(m.name for m in resolve(['cu:abi', 'ext:bound'])))" % extern.PLUGIN)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "cu:abi,ext:bound"


# ---- builds ----------------------------------------------------------------------------------------


@needs_nvcc
def test_c_abi_file_builds_through_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HGEMM_BUILD_CACHE", str(tmp_path / "cache"))
    (m,) = [x for x in extern.load_kernels_dir(_dir(tmp_path, GOOD)) if x.name == "cu:abi"]
    r = m.build()
    assert r.ok, r.log[-2000:]
    assert m.build().cached


@needs_nvcc
@pytest.mark.slow
def test_example_extension_compiles_for_sm90a_against_torch_headers(tmp_path):
    """The example kernel's device and host code compile with the local nvcc and torch's headers
    (the GPU test then builds and runs it for real). The CPU torch wheel lacks one generated CUDA
    header (c10/cuda/impl/cuda_cmake_macros.h, export macros only): an empty stand-in replaces it."""
    stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True)
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")
    tdir = Path(torch.__file__).parent / "include"
    src = tmp_path / "example_ext.cu"
    src.write_text(extern.inline_local_includes(EXAMPLE))
    flags = [f for f in extern._torch_ext_flags() if not f.startswith("-I")]
    cmd = [toolchain.find_nvcc(), "-c", *flags, "-std=c++20", "-Xcompiler", "-fPIC", f"-I{tmp_path / 'stub'}",
           f"-I{tdir}", f"-I{tdir / 'torch' / 'csrc' / 'api' / 'include'}", f"-I{sysconfig.get_paths()['include']}",
           "-DTORCH_EXTENSION_NAME=example_ext", str(src), "-o", str(tmp_path / "example_ext.o")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "example_ext.o").stat().st_size > 0
