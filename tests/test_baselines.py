"""CPU tests of the baselines package: registration, supports(), the cuBLAS argument mapping
(checked by emulating column-major BLAS in numpy on raw buffers), candidate merging, the
correctness filter, versions, and the torch method's CPU path."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

import baselines  # noqa: F401  (registers the methods)
from baselines import cuda_handles as ch
from baselines.lt_candidates import REL_TOL, merge_candidates, output_ok, relative_error, relative_errors
from baselines.mapping import OP_N, OP_T, colmajor_gemm, gemm_ex_kwargs, lt_operand_ptrs
from baselines.operands import alignment, check_operands
from harness import registry
from harness.method import Method, PrepareContext
from harness.problem import Problem, Shape

NAMES = ("torch", "cublas", "cublaslt", "cublaslt-autotune")
SHAPES = [(1, 1, 1), (3, 5, 7), (7, 5, 3), (17, 33, 65), (64, 64, 64), (2, 9, 1), (1, 8, 16)]


def problems(layouts=("nn", "tn")):
    return [Problem(Shape(*s), layout) for s in SHAPES for layout in layouts]


# -- registration ------------------------------------------------------------------------------


def test_all_baselines_registered_as_defaults():
    specs = registry.default_specs()
    for name in NAMES:
        assert name in specs


def test_resolved_baselines_satisfy_the_method_protocol():
    methods = registry.resolve(list(NAMES))
    assert [m.name for m in methods] == list(NAMES)
    for m in methods:
        assert isinstance(m, Method)
        assert m.family == "baseline" and m.is_baseline is True and m.source_hash == ""
        assert isinstance(m.config, dict) and m.config


def test_method_args_are_validated():
    with pytest.raises(ValueError):
        registry.resolve(["cublas:foo=1"])
    with pytest.raises(ValueError):
        registry.resolve(["cublaslt-autotune:bogus=3"])
    with pytest.raises(ValueError):
        registry.resolve(["cublaslt-autotune:max_candidates=many"])
    (m,) = registry.resolve(["cublaslt-autotune:max_candidates=20"])
    assert m.name == "cublaslt-autotune:max_candidates=20"
    assert m.config["max_candidates"] == 20
    (d,) = registry.resolve(["cublaslt-autotune"])
    assert d.name == "cublaslt-autotune" and d.config["max_candidates"] == 100


def test_supports_on_cpu():
    methods = {m.name: m for m in registry.resolve(list(NAMES))}
    for p in problems():
        assert methods["torch"].supports(p, "cpu")
        for name in ("cublas", "cublaslt", "cublaslt-autotune"):
            s = methods[name].supports(p, "cpu")
            assert not s and s.reason == "unsupported on cpu"
            assert methods[name].supports(p, "cuda")  # any M, N, K >= 1 is served on a GPU


def test_constants_match_nvmath_enums():
    import nvmath
    from nvmath.bindings import cublas, cublasLt

    assert ch.CUDA_R_16F == int(nvmath.CudaDataType.CUDA_R_16F)
    assert ch.CUDA_R_32F == int(nvmath.CudaDataType.CUDA_R_32F)
    assert ch.CUBLAS_COMPUTE_32F == int(cublas.ComputeType.COMPUTE_32F)
    assert ch.CUBLAS_GEMM_DEFAULT == int(cublas.GemmAlgo.DEFAULT)
    assert OP_N == int(cublas.Operation.N) and OP_T == int(cublas.Operation.T)
    assert cublasLt.matmul_heuristic_result_dtype.fields["algo"][1] == 0


# -- the column-major mapping, emulated -------------------------------------------------------


def colmajor_view(buf: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    """Element (i, j) of a column-major matrix is buf[i + j * ld]; out-of-range indexes raise."""
    assert ld >= max(1, rows), f"ld {ld} < rows {rows}"
    idx = np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    return buf[idx]


def emulate_gemm(kw: dict, buffers: dict[int, np.ndarray]) -> None:
    """What cublasGemmEx does (alpha=1, beta=0), on flat float64 buffers keyed by pointer."""
    m, n, k = kw["m"], kw["n"], kw["k"]
    a_rows, a_cols = (m, k) if kw["transa"] == OP_N else (k, m)
    b_rows, b_cols = (k, n) if kw["transb"] == OP_N else (n, k)
    a = colmajor_view(buffers[kw["a"]], a_rows, a_cols, kw["lda"])
    b = colmajor_view(buffers[kw["b"]], b_rows, b_cols, kw["ldb"])
    op_a = a if kw["transa"] == OP_N else a.T
    op_b = b if kw["transb"] == OP_N else b.T
    c = op_a @ op_b
    assert kw["ldc"] >= max(1, m)
    idx = np.arange(m)[:, None] + np.arange(n)[None, :] * kw["ldc"]
    buffers[kw["c"]][idx] = c


def row_major_case(p: Problem, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((p.m, p.k))
    b = rng.standard_normal(p.b_shape)
    expected = a @ (b if p.layout == "nn" else b.T)
    return a, b, expected


def mapped_kwargs(p: Problem) -> dict:
    kw = gemm_ex_kwargs(
        colmajor_gemm(p), handle=7, a_ptr=1, b_ptr=2, c_ptr=3, alpha_ptr=4, beta_ptr=5,
        data_type=ch.CUDA_R_16F, compute_type=ch.CUBLAS_COMPUTE_32F, algo=ch.CUBLAS_GEMM_DEFAULT,
    )  # fmt: skip
    # The names must be nvmath's own parameters, all of them, or the real call would fail.
    from nvmath.bindings import cublas

    bound = inspect.signature(cublas.gemm_ex).bind(**kw)
    return dict(bound.arguments)


def run_emulated(p: Problem, kw: dict) -> tuple[np.ndarray, np.ndarray]:
    a, b, expected = row_major_case(p)
    c = np.full(p.m * p.n, np.nan)
    buffers = {1: a.ravel().copy(), 2: b.ravel().copy(), 3: c}
    emulate_gemm(kw, buffers)
    return buffers[3].reshape(p.m, p.n), expected


@pytest.mark.parametrize("p", problems(), ids=str)
def test_gemm_ex_mapping_computes_row_major_product(p):
    kw = mapped_kwargs(p)
    got, expected = run_emulated(p, kw)
    assert np.isfinite(got).all(), "some output element was never written"
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert kw["alpha"] == 4 and kw["beta"] == 5 and kw["handle"] == 7
    assert kw["atype"] == kw["btype"] == kw["ctype"] == ch.CUDA_R_16F


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_emulation_catches_a_wrong_mapping(layout):
    """The mapping test must be able to fail: each single corruption of the args is detected."""
    p = Problem(Shape(3, 5, 7), layout)
    good = mapped_kwargs(p)
    corruptions = [
        {"transa": OP_T if good["transa"] == OP_N else OP_N},
        {"a": good["b"], "b": good["a"]},
        {"m": good["n"], "n": good["m"]},
        {"lda": good["lda"] + 1},
        {"ldc": good["ldc"] + 1},
    ]
    for change in corruptions:
        kw = {**good, **change}
        try:
            got, expected = run_emulated(p, kw)
        except (AssertionError, IndexError, ValueError, KeyError):
            continue  # the emulated call itself is invalid: detected
        assert not np.allclose(got, expected, equal_nan=False), f"undetected corruption {change}"


@pytest.mark.parametrize("p", problems(), ids=str)
def test_lt_layouts_compute_row_major_product(p):
    """cuBLASLt gets the same mapping as layouts (rows, cols, ld) plus TRANSA/TRANSB."""
    g = colmajor_gemm(p)
    arg_a, arg_b = lt_operand_ptrs(g, 1, 2)
    # A layout's rows x cols is the stored matrix; op() applies on top, as in cuBLASLt.
    op_a_shape = (g.a.rows, g.a.cols) if g.transa == OP_N else (g.a.cols, g.a.rows)
    op_b_shape = (g.b.rows, g.b.cols) if g.transb == OP_N else (g.b.cols, g.b.rows)
    assert op_a_shape == (g.m, g.k) and op_b_shape == (g.k, g.n) and (g.c.rows, g.c.cols) == (g.m, g.n)
    kw = dict(transa=g.transa, transb=g.transb, m=g.m, n=g.n, k=g.k, a=arg_a, lda=g.a.ld,
              b=arg_b, ldb=g.b.ld, c=3, ldc=g.c.ld)  # fmt: skip
    got, expected = run_emulated(p, kw)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


# -- candidate merging and validation ---------------------------------------------------------


def fake_results(ids: list[int]) -> np.ndarray:
    from baselines.lt_plan import result_dtype

    r = np.zeros(len(ids), dtype=result_dtype())
    for i, v in enumerate(ids):
        r[i]["algo"]["data_"][0] = v
        r[i]["workspace_size"] = v * 10
    return r


def first_words(arr: np.ndarray) -> list[int]:
    return [int(x) for x in arr["algo"]["data_"][:, 0]]


def test_merge_keeps_best_fit_first_round_robins_and_dedupes():
    best = fake_results([5, 6])
    per_id = [fake_results([1, 2, 3]), fake_results([6, 7]), fake_results([])]
    merged = merge_candidates(best, per_id, limit=100)
    assert first_words(merged) == [5, 6, 1, 2, 7, 3]
    assert [int(w) for w in merged["workspace_size"]] == [50, 60, 10, 20, 70, 30]
    assert first_words(merge_candidates(best, per_id, limit=3)) == [5, 6, 1]
    assert len(merge_candidates(fake_results([]), [], limit=100)) == 0


def test_relative_error_filter_rejects_wrong_and_accepts_rounding():
    torch.manual_seed(0)
    ref32 = torch.randn(64, 48)
    ref = ref32.half()
    # A different correct kernel: same values, rounded differently (one fp16 ulp here and there).
    other = (ref32 * (1 + 2.0**-12)).half()
    assert output_ok(other, ref)
    assert relative_error(ref, ref) == 0.0
    assert not output_ok((ref32 * 1.01).half(), ref)  # 1% off
    bad = ref.clone()
    bad[3, 4] = float("nan")
    assert relative_error(bad, ref) == math.inf and not output_ok(bad, ref)
    unwritten = ref.clone()
    unwritten[:8] = 0
    assert not output_ok(unwritten, ref)
    assert REL_TOL < 1e-2


def test_relative_errors_read_once_through_one_buffer():
    """The autotune's validation form: one output buffer rewritten per candidate, the errors read at the end. Each
    error must be the one of the output as it was when yielded (not the buffer's last state), a candidate that
    raised (None) infinite, and a zero reference measured by the absolute norm."""
    torch.manual_seed(1)
    ref = torch.randn(32, 16).half()
    cases = [ref.clone(), (ref.float() * 1.01).half(), None, ref.clone()]
    cases[3][0, 0] = float("nan")
    buf = torch.empty_like(ref)

    def outputs():
        for c in cases:
            if c is None:
                yield None
                continue
            buf.copy_(c)
            yield buf

    got = relative_errors(outputs(), ref)
    want1 = float(torch.linalg.vector_norm(cases[1].float() - ref.float()) / torch.linalg.vector_norm(ref.float()))
    assert got[0] == 0.0 and got[2] == math.inf and got[3] == math.inf
    assert got[1] == pytest.approx(want1, rel=1e-6) and got[1] > REL_TOL
    zero = torch.zeros(4, 4).half()
    assert relative_errors(iter([torch.ones(4, 4).half()]), zero) == [pytest.approx(4.0)]
    assert relative_errors(iter([]), ref) == []


# -- operand checks and alignment -------------------------------------------------------------


def test_check_operands_rejects_wrong_tensors():
    p = Problem(Shape(4, 6, 8), "tn")
    a = torch.zeros(4, 8, dtype=torch.float16)
    b = torch.zeros(6, 8, dtype=torch.float16)
    c = torch.zeros(4, 6, dtype=torch.float16)
    check_operands(p, a, b, c)
    with pytest.raises(ValueError):
        check_operands(p, a, torch.zeros(8, 6, dtype=torch.float16), c)  # nn-shaped B
    with pytest.raises(ValueError):
        check_operands(p, a.float(), b, c)
    with pytest.raises(ValueError):
        check_operands(p, a, b, torch.zeros(6, 4, dtype=torch.float16).t())  # right shape, column-major


def test_alignment():
    assert alignment(0x1000) == 256
    assert alignment(0x1000 + 2) == 2
    assert alignment(0x1000 + 16) == 16
    assert alignment(0) == 256


# -- versions ---------------------------------------------------------------------------------


def test_library_versions_never_raises_and_has_string_fields():
    from baselines.versions import library_versions

    v = library_versions()
    for key in ("cublas_version", "cublaslt_version", "nvmath_version", "cublas_library"):
        assert isinstance(v[key], str)
    import nvmath

    assert v["nvmath_version"] == nvmath.__version__
    assert isinstance(v["cublas_files_loaded"], list)
    if not torch.cuda.is_available():
        assert v["cublas_version"] == "" or v["cublas_version"].count(".") == 2


# -- the torch method on CPU ------------------------------------------------------------------


def no_timing(fns):
    raise AssertionError("the torch baseline must not ask for timing")


@pytest.mark.parametrize("p", problems(), ids=str)
def test_torch_method_cpu_is_correct(p):
    (m,) = registry.resolve(["torch"])
    torch.manual_seed(1)
    a = torch.randn(p.m, p.k).half()
    b = torch.randn(*p.b_shape).half()
    c = torch.full((p.m, p.n), float("nan"), dtype=torch.float16)
    prepared = m.prepare(p, PrepareContext("cpu", (a, b, c), no_timing))
    prepared.fn(a, b, c)
    bb = b.double() if p.layout == "nn" else b.double().t()
    ref = a.double() @ bb
    assert torch.isfinite(c).all()
    err = torch.linalg.vector_norm(c.double() - ref) / max(float(torch.linalg.vector_norm(ref)), 1e-30)
    assert err < 2e-3, err
    # Same pointers, new values: the output must follow.
    a.neg_()
    prepared.fn(a, b, c)
    torch.testing.assert_close(c.double(), -ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_gemm_ex_template_puts_pointers_where_nvmath_expects_them(layout):
    from nvmath.bindings import cublas

    from baselines.mapping import gemm_ex_template

    p = Problem(Shape(3, 5, 7), layout)
    g = colmajor_gemm(p)
    fixed = dict(handle=7, alpha_ptr=4, beta_ptr=5, data_type=ch.CUDA_R_16F,
                 compute_type=ch.CUBLAS_COMPUTE_32F, algo=ch.CUBLAS_GEMM_DEFAULT)  # fmt: skip
    args, ia, ib, ic = gemm_ex_template(g, cublas.gemm_ex, **fixed)
    args[ia], args[ib], args[ic] = 1, 2, 3
    names = list(inspect.signature(cublas.gemm_ex).parameters)
    assert dict(zip(names, args)) == gemm_ex_kwargs(g, a_ptr=1, b_ptr=2, c_ptr=3, **fixed)
    assert len(args) == len(names)
