"""The cuBLAS baselines' Python plumbing, run on CPU against a fake cuBLAS / cuBLASLt.

The fake implements the nvmath binding functions the baselines call, with the same names and
argument order, on host memory: descriptors and preferences are recorded, ``matmul``/``gemm_ex``
emulate column-major BLAS in numpy on the raw pointers of CPU tensors, and the heuristic hands out
made-up algorithms, one of which computes a wrong result and one of which raises. This cannot say
anything about real cuBLAS (the GPU tests do), but it runs every line of the prepared calls and of
the autotuner's bookkeeping: operand swap, layouts, alignment fallback, candidate validation,
choice by the harness's timings, and that ``close()`` destroys every descriptor it created.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest
import torch

from baselines import cuda_handles as ch
from harness.method import PrepareContext
from harness.problem import Problem, Shape

OP_N, OP_T = 0, 1
WRONG_ALGO, RAISING_ALGO, SLOW_ALGO = 3, 12, 11


def mem(ptr: int, nbytes: int, dtype) -> np.ndarray:
    """A writable numpy view of ``nbytes`` of host memory at ``ptr``."""
    return np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype=dtype)


def colmajor_read(ptr, rows, cols, ld) -> np.ndarray:
    n = ld * (cols - 1) + rows
    buf = mem(ptr, 2 * n, np.float16)
    return buf[np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld].astype(np.float64)


def colmajor_write(ptr, value: np.ndarray, ld) -> None:
    rows, cols = value.shape
    buf = mem(ptr, 2 * (ld * (cols - 1) + rows), np.float16)
    buf[np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld] = value.astype(np.float16)


class FakeLtError(Exception):
    pass


class FakeLt:
    """Just enough of ``nvmath.bindings.cublasLt`` for the baselines, on host memory."""

    cuBLASLtError = FakeLtError

    def __init__(self):
        import nvmath.bindings.cublasLt as real

        self.real = real
        self.ids = itertools.count(100)
        self.descs, self.layouts, self.prefs = {}, {}, {}
        self.calls = []
        self.workspaces = []  # (pointer, bytes) of every matmul
        # an algorithm id BEST_FIT ranks first only at cuBLAS's 32 MiB workspace limit or less (a larger limit ranks
        # workspace-hungry configurations ahead and leaves it out), None: none such
        self.small_workspace_first = None

    def __getattr__(self, name):  # enums and attribute dtype queries: the real (pure) ones
        return getattr(self.real, name)

    def _read_attr(self, dtype_of, attr, buf, size):
        dt = np.dtype(dtype_of(attr))
        assert size == dt.itemsize, f"attribute {attr!r}: size {size} != {dt.itemsize}"
        return mem(buf, size, dt)[0].item()

    def create(self):
        return 1

    def matmul_desc_create(self, compute_type, scale_type):
        assert (compute_type, scale_type) == (ch.CUBLAS_COMPUTE_32F, ch.CUDA_R_32F)
        h = next(self.ids)
        self.descs[h] = {"transa": OP_N, "transb": OP_N}
        return h

    def matmul_desc_set_attribute(self, desc, attr, buf, size):
        A = self.real.MatmulDescAttribute
        key = {int(A.TRANSA): "transa", int(A.TRANSB): "transb"}[attr]
        self.descs[desc][key] = self._read_attr(self.real.get_matmul_desc_attribute_dtype, attr, buf, size)

    def matmul_desc_destroy(self, desc):
        del self.descs[desc]

    def matrix_layout_create(self, type, rows, cols, ld):
        assert type == ch.CUDA_R_16F and ld >= max(1, rows)
        h = next(self.ids)
        self.layouts[h] = (rows, cols, ld)
        return h

    def matrix_layout_destroy(self, layout):
        del self.layouts[layout]

    def matmul_preference_create(self):
        h = next(self.ids)
        self.prefs[h] = {}
        return h

    def matmul_preference_set_attribute(self, pref, attr, buf, size):
        name = self.real.MatmulPreferenceAttribute(attr).name
        self.prefs[pref][name] = self._read_attr(self.real.get_matmul_preference_attribute_dtype, attr, buf, size)

    def matmul_preference_destroy(self, pref):
        del self.prefs[pref]

    def matmul_algo_get_ids(self, handle, compute, scale, at, bt, ct, dt, limit):
        return (10, SLOW_ALGO, RAISING_ALGO)

    def matmul_algo_init(self, handle, compute, scale, at, bt, ct, dt, algo_id, algo_ptr):
        mem(algo_ptr, 64, np.uint64)[:] = 0
        mem(algo_ptr, 64, np.uint64)[0] = algo_id

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, pref, count, results_ptr, returned_ptr):
        p = self.prefs[pref]
        dtype = self.real.matmul_heuristic_result_dtype
        res = mem(results_ptr, count * dtype.itemsize, dtype)
        if p.get("SEARCH_MODE", 0) == int(self.real.MatmulSearch.LIMITED_BY_ALGO_ID):
            algo_id = int(res[0]["algo"]["data_"][0])
            found = [(algo_id, cfg, 0) for cfg in (1, 2)]
        else:
            found = [(1, 0, 0), (2, 0, 4096), (WRONG_ALGO, 0, 0)]  # (id, config, workspace bytes)
            if p.get("REDUCTION_SCHEME_MASK") == 0:
                found = [(1, 0, 0), (4, 0, 0)]
            elif (self.small_workspace_first is not None
                  and p.get("MAX_WORKSPACE_BYTES", 0) <= ch.CUBLAS_WORKSPACE_BYTES):
                found = [(self.small_workspace_first, 0, 0), *found]
        if p.get("MIN_ALIGNMENT_A_BYTES", 256) < 16:
            found = [(5, 0, 0)]  # only a "non-TMA" kernel works on poorly aligned pointers
        found = [f for f in found if f[2] <= p.get("MAX_WORKSPACE_BYTES", 0)][:count]
        if not found:
            raise FakeLtError("CUBLAS_STATUS_NOT_SUPPORTED")
        for i, (algo_id, cfg, ws) in enumerate(found):
            res[i]["algo"]["data_"][:] = 0
            res[i]["algo"]["data_"][0] = algo_id
            res[i]["algo"]["data_"][1] = cfg
            res[i]["workspace_size"] = ws
            res[i]["state"] = 0
            res[i]["waves_count"] = 1.0
        mem(returned_ptr, 4, np.int32)[0] = len(found)

    def matmul_algo_config_get_attribute(self, algo_ptr, attr, buf, size, written):
        dt = np.dtype(self.real.get_matmul_algo_config_attribute_dtype(attr))
        value = int(mem(algo_ptr, 64, np.uint64)[0]) if attr == int(self.real.MatmulAlgoConfigAttribute.ID) else 0
        mem(buf, dt.itemsize, dt)[0] = value

    def matmul(self, handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, ws, ws_size, stream):
        algo_id = int(mem(algo, 64, np.uint64)[0])
        self.calls.append(algo_id)
        self.workspaces.append((ws, ws_size))
        if algo_id == RAISING_ALGO:
            raise FakeLtError("CUBLAS_STATUS_EXECUTION_FAILED")
        if algo_id == 2:
            assert ws_size >= 4096 and ws != 0
        dsc = self.descs[desc]
        A = colmajor_read(a, *self.layouts[adesc])
        B = colmajor_read(b, *self.layouts[bdesc])
        opA = A if dsc["transa"] == OP_N else A.T
        opB = B if dsc["transb"] == OP_N else B.T
        al, be = mem(alpha, 4, np.float32)[0], mem(beta, 4, np.float32)[0]
        assert (al, be) == (1.0, 0.0) and c == d and cdesc == ddesc
        out = al * (opA @ opB)
        if algo_id == WRONG_ALGO:
            out = out * 1.1
        rows, cols, ldc = self.layouts[ddesc]
        assert out.shape == (rows, cols)
        colmajor_write(d, out, ldc)


class FakeCublas:
    def __init__(self):
        self.state = {}

    def set_stream(self, handle, stream):
        self.state["stream"] = stream
        self.state.pop("workspace", None)  # as the real cublasSetStream: back to the default pool

    def set_workspace(self, handle, ptr, size):
        self.state["workspace"] = (ptr, size)

    def gemm_ex(self, handle, transa, transb, m, n, k, alpha, a, atype, lda, b, btype, ldb, beta, c, ctype, ldc,
                compute_type, algo):  # fmt: skip
        assert "workspace" in self.state, "workspace not set after set_stream (graph capture would allocate)"
        assert atype == btype == ctype == ch.CUDA_R_16F and compute_type == ch.CUBLAS_COMPUTE_32F
        A = colmajor_read(a, *((m, k) if transa == OP_N else (k, m)), lda)
        B = colmajor_read(b, *((k, n) if transb == OP_N else (n, k)), ldb)
        out = (A if transa == OP_N else A.T) @ (B if transb == OP_N else B.T)
        colmajor_write(c, out, ldc)


@pytest.fixture
def fake(monkeypatch):
    import nvmath.bindings
    import sys

    from baselines import cublaslt_autotune

    lt, cb = FakeLt(), FakeCublas()
    monkeypatch.setattr(nvmath.bindings, "cublasLt", lt, raising=False)
    monkeypatch.setattr(nvmath.bindings, "cublas", cb, raising=False)
    monkeypatch.setitem(sys.modules, "nvmath.bindings.cublasLt", lt)
    monkeypatch.setitem(sys.modules, "nvmath.bindings.cublas", cb)
    monkeypatch.setattr(ch, "current_device", lambda: 0)
    monkeypatch.setattr(ch, "current_stream_ptr", lambda: 0)
    monkeypatch.setattr(ch, "cublaslt_handle", lambda device: 1)
    monkeypatch.setattr(ch, "cublas_handle", lambda device: (1, torch.empty(64, dtype=torch.uint8)))
    monkeypatch.setattr(ch, "allocate_workspace", lambda n, device: torch.empty(max(n, 1), dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)

    def cpu_buffers(problem, device, seed=0):
        g = torch.Generator().manual_seed(seed)
        a = aligned((torch.rand(problem.m, problem.k, generator=g) * 2 - 1).half())
        b = aligned((torch.rand(*problem.b_shape, generator=g) * 2 - 1).half())
        ref = aligned(torch.empty(problem.m, problem.n, dtype=torch.float16))
        out = aligned(torch.empty(problem.m, problem.n, dtype=torch.float16))
        return a, b, ref, out

    monkeypatch.setattr(cublaslt_autotune, "validation_buffers", cpu_buffers)
    monkeypatch.setattr(cublaslt_autotune, "_TUNED", {})  # every test tunes afresh
    monkeypatch.setattr(ch, "_lt_workspace", {})  # no CPU buffer outlives the test
    return lt


def aligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` at a 256-byte aligned address, as CUDA allocations are (CPU ones need not be)."""
    buf = torch.empty(t.numel() + 128, dtype=t.dtype)
    skip = (-buf.data_ptr() % 256) // t.element_size()
    out = buf[skip : skip + t.numel()].view(t.shape)
    out.copy_(t)
    assert out.data_ptr() % 256 == 0
    return out


def cpu_case(p: Problem, seed=1):
    g = torch.Generator().manual_seed(seed)
    a = aligned((torch.rand(p.m, p.k, generator=g) * 2 - 1).half())
    b = aligned((torch.rand(*p.b_shape, generator=g) * 2 - 1).half())
    c = aligned(torch.full((p.m, p.n), float("nan"), dtype=torch.float16))
    ref = a.double() @ (b.double() if p.layout == "nn" else b.double().t())
    return a, b, c, ref


def assert_close(c, ref):
    assert torch.isfinite(c).all()
    err = torch.linalg.vector_norm(c.double() - ref) / torch.linalg.vector_norm(ref)
    assert err < 2e-3, float(err)


def ctx_for(fake, inputs, timings=None):
    """A PrepareContext whose timer returns the given per-algo-id medians (default: by call order);
    ``seen`` gets each timing's candidate count, ``ctx.halvings`` the successive-halving settings passed."""
    seen = []
    halvings: list[dict] = []

    def time_candidates(fns, warmed=False, **halving):
        seen.append(len(fns))
        halvings.append(halving)
        out = []
        for fn in fns:
            before = len(fake.calls)
            try:
                fn(*inputs)
            except Exception:
                out.append(float("inf"))
                continue
            algo_id = fake.calls[before]
            out.append((timings or {}).get(algo_id, 10.0))
        return out

    ctx = PrepareContext("cuda", inputs, time_candidates)
    ctx.halvings = halvings  # type: ignore[attr-defined]
    return ctx, seen


PROBLEMS = [Problem(Shape(*s), lay) for s in [(1, 1, 1), (5, 7, 3), (17, 33, 65)] for lay in ("nn", "tn")]


@pytest.mark.parametrize("p", PROBLEMS, ids=str)
def test_cublas_gemmex_plumbing(fake, p):
    from baselines.cublas_gemmex import CublasGemmEx

    a, b, c, ref = cpu_case(p)
    prep = CublasGemmEx().prepare(p, PrepareContext("cuda", (a, b, c), None))
    prep.fn(a, b, c)
    assert_close(c, ref)


@pytest.mark.parametrize("p", PROBLEMS, ids=str)
def test_cublaslt_heuristic_plumbing_and_close(fake, p):
    from baselines.cublaslt import CublasLtHeuristic

    a, b, c, ref = cpu_case(p)
    prep = CublasLtHeuristic().prepare(p, PrepareContext("cuda", (a, b, c), None))
    assert prep.info["algo_id"] == 1 and prep.info["workspace_bytes"] == 0
    assert prep.info["alignment_bytes"] >= 16
    prep.fn(a, b, c)
    assert_close(c, ref)
    assert fake.descs and fake.layouts
    prep.close()
    assert not fake.descs and not fake.layouts and not fake.prefs, "descriptors leaked"


def test_cublaslt_falls_back_on_misaligned_pointers(fake):
    from baselines.cublaslt import CublasLtHeuristic

    p = Problem(Shape(6, 10, 4), "tn")
    a, b, c, ref = cpu_case(p)
    prep = CublasLtHeuristic().prepare(p, PrepareContext("cuda", (a, b, c), None))
    buf = torch.empty(a.numel() + 1, dtype=torch.float16)
    a_off = buf[1:].view(a.shape)
    a_off.copy_(a)
    fake.calls.clear()
    prep.fn(a_off, b, c)
    assert fake.calls == [5], "a 2-byte aligned call must use an algorithm chosen for that alignment"
    assert_close(c, ref)
    fake.calls.clear()
    prep.fn(a, b, c)
    assert fake.calls == [1]
    prep.close()


def test_prepared_call_rejects_wrong_operands(fake):
    from baselines.cublaslt import CublasLtHeuristic

    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    prep = CublasLtHeuristic().prepare(p, PrepareContext("cuda", (a, b, c), None))
    with pytest.raises(ValueError):
        prep.fn(a, b.t().contiguous(), c)
    prep.close()


@pytest.mark.parametrize("p", PROBLEMS, ids=str)
def test_autotune_validates_times_and_picks_fastest(fake, p):
    from baselines.cublaslt_autotune import CublasLtAutotune

    a, b, c, ref = cpu_case(p)
    # Algo 10's second configuration (config 2) is the fastest in these made-up timings.
    timings = {1: 9.0, 2: 8.0, 4: 7.5, 10: 5.0, SLOW_ALGO: 50.0}
    ctx, seen = ctx_for(fake, (a, b, c), timings)
    prep = CublasLtAutotune().prepare(p, ctx)
    info = prep.info
    # best-fit {1, 2, 3}; reduction-filtered adds {4}; ids 10, 11 give 2 configs each; 12 raises.
    assert info["candidates_heuristic"] == 3
    assert info["candidates"] == 3 + 1 + 2 + 2 + 2
    assert info["candidates_valid"] == info["candidates"] - 1 - 2  # wrong algo 3, raising 12 x2
    assert info["candidates_added_by_reduction_filters"] == 1 and info["candidates_added_by_algo_id"] == 6
    assert info["candidates_found"] == info["candidates"] and info["algo_ids_listed"] == 3
    assert info["algo_id"] == 10
    assert info["tuned_us"] == 5.0 and info["top1_us"] == 9.0
    assert seen == [info["candidates_valid"]]
    assert prep.setup_s > 0
    fake.calls.clear()
    c.fill_(float("nan"))
    prep.fn(a, b, c)
    assert fake.calls == [10]
    assert_close(c, ref)
    prep.close()
    assert not fake.descs and not fake.layouts and not fake.prefs


def test_autotune_tunes_a_problem_once_per_process_and_serves_that_choice(fake):
    """A second instance prepared for the same problem serves the first one's winner without
    timing (no second draw among near-ties); another layout or limit is tuned afresh."""
    from baselines.cublaslt_autotune import CublasLtAutotune, forget_tuning

    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    ctx, seen = ctx_for(fake, (a, b, c), {10: 5.0})
    first = CublasLtAutotune().prepare(p, ctx)
    ctx2, seen2 = ctx_for(fake, (a, b, c), {4: 1.0})  # would pick algo 4 if it timed again
    again = CublasLtAutotune().prepare(p, ctx2)
    assert first.info["tuned"] == "timed" and again.info["tuned"] == "reused" and seen2 == []
    assert again.info["algo_id"] == first.info["algo_id"] == 10
    assert again.info["tuned_us"] == first.info["tuned_us"] == 5.0
    fake.calls.clear()
    c.fill_(float("nan"))
    again.fn(a, b, c)
    assert fake.calls == [10]
    assert_close(c, ref)
    other = CublasLtAutotune(max_candidates=50).prepare(p, ctx2)  # another limit: its own tuning
    tn = Problem(Shape(6, 10, 4), "tn")
    ta, tb, tc, _ = cpu_case(tn)
    ctx3, seen3 = ctx_for(fake, (ta, tb, tc), {4: 1.0})
    by_layout = CublasLtAutotune().prepare(tn, ctx3)
    assert other.info["tuned"] == by_layout.info["tuned"] == "timed" and len(seen2) == 1 and len(seen3) == 1
    forget_tuning()
    ctx4, seen4 = ctx_for(fake, (a, b, c), {4: 1.0})
    fresh = CublasLtAutotune().prepare(p, ctx4)
    assert fresh.info["tuned"] == "timed" and fresh.info["algo_id"] == 4 and len(seen4) == 1
    for prep in (first, again, other, by_layout, fresh):
        prep.close()
    assert not fake.descs and not fake.layouts and not fake.prefs


@pytest.mark.parametrize("shared", [True, False])
def test_cublaslt_calls_share_one_workspace_buffer(fake, monkeypatch, shared):
    """Every prepared cuBLASLt call (heuristic, autotune, a second autotune instance) runs on the
    same per-device buffer, so separate instances of one algorithm cannot differ by where their
    workspace landed; SHARED_LT_WORKSPACE=False gives each its own buffer again."""
    from baselines.cublaslt import CublasLtHeuristic
    from baselines.cublaslt_autotune import CublasLtAutotune

    monkeypatch.setattr(ch, "SHARED_LT_WORKSPACE", shared)
    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    ctx, _ = ctx_for(fake, (a, b, c), {2: 1.0})  # algo 2 needs a 4096-byte workspace
    preps = [CublasLtAutotune().prepare(p, ctx), CublasLtAutotune().prepare(p, ctx)]
    preps.append(CublasLtHeuristic(max_workspace=8192).prepare(Problem(Shape(6, 10, 4), "tn"), ctx))
    assert [pr.info["workspace_bytes"] for pr in preps[:2]] == [4096, 4096]
    fake.workspaces.clear()
    for pr in preps[:2]:
        pr.fn(a, b, c)
        assert_close(c, ref)
    (ws0, n0), (ws1, n1) = fake.workspaces
    assert n0 == n1 == 4096 and ws0 != 0
    assert (ws0 == ws1) == shared
    if shared:
        assert ch._lt_workspace[0].numel() >= ch.CUBLAS_WORKSPACE_BYTES
    for pr in preps:
        pr.close()


def test_autotune_respects_max_candidates(fake):
    from baselines.cublaslt_autotune import CublasLtAutotune

    p = Problem(Shape(8, 8, 8), "nn")
    a, b, c, ref = cpu_case(p)
    ctx, seen = ctx_for(fake, (a, b, c))
    prep = CublasLtAutotune(max_candidates=2).prepare(p, ctx)
    assert prep.info["candidates"] == 2 and prep.info["candidates_valid"] == 2
    assert prep.info["candidates_found"] == 2 + 1 + 6  # BEST_FIT asked for 2: {1, 2}; {4}; 3 ids x 2
    prep.close()


def test_autotune_with_small_workspace_drops_candidates_that_need_more(fake):
    from baselines.cublaslt_autotune import CublasLtAutotune

    p = Problem(Shape(8, 8, 8), "nn")
    a, b, c, ref = cpu_case(p)
    ctx, _ = ctx_for(fake, (a, b, c))
    prep = CublasLtAutotune(max_workspace=1024).prepare(p, ctx)
    assert prep.info["candidates_heuristic"] == 2  # algo 2 needs 4096 bytes
    prep.close()


def test_autotune_candidates_run_as_themselves_or_raise(fake):
    """A candidate call never swaps in another algorithm: misaligned pointers raise instead."""
    from baselines.lt_plan import LtPlan

    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    plan = LtPlan(p, 0, 256)
    top = plan.best_fit(1, 1 << 20)
    strict = plan.make_fn(top[:1].copy(), torch.empty(1, dtype=torch.uint8), fallback=False)
    strict(a, b, c)
    assert_close(c, ref)
    a_off = torch.empty(a.numel() + 1, dtype=torch.float16)[1:].view(a.shape)
    a_off.copy_(a)
    with pytest.raises(ValueError):
        strict(a_off, b, c)
    plan.close()


def test_autotuned_call_falls_back_on_misaligned_pointers(fake):
    from baselines.cublaslt_autotune import CublasLtAutotune

    p = Problem(Shape(6, 10, 4), "tn")
    a, b, c, ref = cpu_case(p)
    ctx, _ = ctx_for(fake, (a, b, c), {10: 1.0})
    prep = CublasLtAutotune().prepare(p, ctx)
    a_off = torch.empty(a.numel() + 1, dtype=torch.float16)[1:].view(a.shape)
    a_off.copy_(a)
    fake.calls.clear()
    prep.fn(a_off, b, c)
    assert fake.calls == [5]
    assert_close(c, ref)
    prep.close()


def test_fakes_have_nvmaths_signatures():
    """The fakes take the real bindings' parameters in the real order, or these tests prove nothing."""
    import inspect

    from nvmath.bindings import cublas, cublasLt

    def names(f):
        return list(inspect.signature(f).parameters)

    assert names(FakeCublas().gemm_ex) == names(cublas.gemm_ex)
    for fn in ("matmul", "matmul_algo_get_heuristic", "matmul_algo_init", "matrix_layout_create",
               "matmul_desc_create", "matmul_algo_get_ids", "matmul_algo_config_get_attribute"):  # fmt: skip
        fake_params, real_params = names(getattr(FakeLt(), fn)), names(getattr(cublasLt, fn))
        assert len(fake_params) == len(real_params), fn


def test_autotune_halving_knobs_name_a_separate_method_tuned_on_its_own(fake):
    """keep / final_rounds reach the timing core, name another method, and are tuned apart from the
    default autotune (the kept winner of one is never served as the other's)."""
    import baselines  # noqa: F401  (registers the methods)
    from baselines.cublaslt_autotune import CublasLtAutotune
    from harness import registry

    (m,) = registry.resolve(["cublaslt-autotune:keep=0.1,final_rounds=3,screen_us=30"])
    assert m.name == "cublaslt-autotune:keep=0.1,final_rounds=3,screen_us=30"
    assert m.config["halving_keep_fraction"] == 0.1 and m.config["halving_rounds"] == 3
    assert m.config["halving_screen_batch_us"] == 30
    for bad in ("keep=0", "keep=1.5", "final_rounds=0", "screen_us=0"):
        with pytest.raises(Exception):
            registry.resolve([f"cublaslt-autotune:{bad}"])
    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    ctx, seen = ctx_for(fake, (a, b, c), {10: 5.0})
    default = CublasLtAutotune().prepare(p, ctx)
    cheap = m.prepare(p, ctx)
    assert default.info["tuned"] == cheap.info["tuned"] == "timed" and len(seen) == 2
    assert ctx.halvings == [{}, {"keep_fraction": 0.1, "rounds": 3, "screen_batch_us": 30.0}]
    for prep in (default, cheap):
        prep.close()


def test_autotune_times_the_heuristics_pick_at_the_default_workspace(fake):
    """BEST_FIT at autotune's 1 GiB limit can rank the ``cublaslt`` baseline's algorithm (its pick at 32 MiB) out of
    every list; autotune asks for it apart, times it, and keeps it where it is fastest."""
    from baselines.cublaslt import CublasLtHeuristic
    from baselines.cublaslt_autotune import CublasLtAutotune

    fake.small_workspace_first = 7
    p = Problem(Shape(8, 8, 8), "tn")
    a, b, c, ref = cpu_case(p)
    heur = CublasLtHeuristic().prepare(p, ctx_for(fake, (a, b, c))[0])
    assert heur.info["algo_id"] == 7
    ctx, seen = ctx_for(fake, (a, b, c), {1: 9.0, 7: 4.0, 10: 5.0})
    prep = CublasLtAutotune().prepare(p, ctx)
    assert prep.info["candidates_added_by_default_workspace"] == 1 and prep.info["algo_id"] == 7
    fake.calls.clear()
    c.fill_(float("nan"))
    prep.fn(a, b, c)
    assert fake.calls == [7]
    assert_close(c, ref)
    for pr in (heur, prep):
        pr.close()


class FakeCallTimes:
    """The harness's ``CallTimes`` on the fake cuBLASLt: a call's time is its algorithm id's entry in ``times``."""

    def __init__(self, fake, times, unavailable=None):
        self.fake, self.times, self.unavailable = fake, times, unavailable
        self.algo_of_call: dict[int, int] = {}
        self.closed = False

    def call(self, call_id, fn, *args):
        before = len(self.fake.calls)
        out = fn(*args)
        self.algo_of_call[call_id] = self.fake.calls[before]
        return out

    def close(self):
        self.closed = True
        return {} if self.unavailable else {i: self.times.get(a, 10.0) for i, a in self.algo_of_call.items()}


def test_autotune_screen_auto_screens_by_validation_calls_only_on_long_calls(fake, monkeypatch):
    """``screen=auto``: a problem of at least ``AUTO_SCREEN_FLOP`` FLOPs is screened by its validation calls, a smaller
    one by graph rounds (where the clock's synchronizations cost more than the rounds they replace)."""
    from dataclasses import replace

    import baselines  # noqa: F401  (registers the methods)
    from baselines import cublaslt_autotune
    from harness import registry

    (m,) = registry.resolve(["cublaslt-autotune"])  # the default
    (named,) = registry.resolve(["cublaslt-autotune:screen=auto"])
    assert m.name == named.name == "cublaslt-autotune" and m.config["screen"] == "auto"
    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)

    def screened_by(flop_limit):
        monkeypatch.setattr(cublaslt_autotune, "AUTO_SCREEN_FLOP", flop_limit)
        cublaslt_autotune.forget_tuning()
        base, _ = ctx_for(fake, (a, b, c), {10: 5.0})
        ctx = replace(base, call_times=lambda: FakeCallTimes(fake, {10: 1.0}))
        prep = m.prepare(p, ctx)
        prep.close()
        return prep.info["screened_by"]

    assert screened_by(2.0 * 6 * 10 * 4 + 1) == "graph rounds"
    assert screened_by(2.0 * 6 * 10 * 4) == "validation calls (CUPTI)"


def test_autotune_drop_knob_names_the_method_and_reaches_the_timing_core(fake):
    """``drop=F`` makes a differently named method whose timing core drops finalists trailing by more than F after
    ``DROP_AFTER`` final rounds; a non-positive fraction is refused."""
    import baselines  # noqa: F401  (registers the methods)
    from baselines.cublaslt_autotune import DROP_AFTER, forget_tuning
    from harness import registry

    (m,) = registry.resolve(["cublaslt-autotune:screen=validation,drop=0.05"])
    assert m.name == "cublaslt-autotune:screen=validation,drop=0.05"
    assert m.config["halving_drop_margin"] == 0.05 and m.config["halving_drop_after"] == DROP_AFTER
    for bad in ("drop=0", "drop=-0.1"):
        with pytest.raises(ValueError, match="drop"):
            registry.resolve([f"cublaslt-autotune:{bad}"])
    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    forget_tuning()
    base, _ = ctx_for(fake, (a, b, c), {10: 5.0})
    seen: list = []

    def time_candidates(fns, **kw):
        seen.append(kw)
        return base.time_candidates(fns, **kw)

    from dataclasses import replace
    (d,) = registry.resolve(["cublaslt-autotune:drop=0.05"])
    d.prepare(p, replace(base, time_candidates=time_candidates)).close()
    assert seen[-1]["drop_margin"] == 0.05 and seen[-1]["drop_after"] == DROP_AFTER


def test_autotune_screened_by_its_validation_calls(fake):
    """``screen=validation``: each candidate's validation call is timed by the harness's clock and those times, in
    the order of the valid candidates, replace the screening rounds; the default autotune on a short call and
    ``screen=graph`` never open the clock, and without a clock (or when it could not trace) the graph screening
    serves and the row says why."""
    from dataclasses import replace

    import baselines  # noqa: F401  (registers the methods)
    from baselines.cublaslt_autotune import CublasLtAutotune
    from harness import registry

    (m,) = registry.resolve(["cublaslt-autotune:screen=validation"])
    assert m.name == "cublaslt-autotune:screen=validation" and m.config["screen"] == "validation"
    (graph,) = registry.resolve(["cublaslt-autotune:screen=graph"])
    assert graph.name == "cublaslt-autotune:screen=graph" and graph.config["screen"] == "graph"
    for bad in ("screen=graphs", "screen=validation,screen_us=30"):
        with pytest.raises(ValueError):
            registry.resolve([f"cublaslt-autotune:{bad}"])

    p = Problem(Shape(6, 10, 4), "nn")
    a, b, c, ref = cpu_case(p)
    passed: list = []
    clocks: list[FakeCallTimes] = []

    def run(method, clock_kw=None, with_clock=True):
        forget = __import__("baselines.cublaslt_autotune", fromlist=["forget_tuning"]).forget_tuning
        forget()
        fake.calls.clear()
        base, _ = ctx_for(fake, (a, b, c), {10: 5.0})

        def time_candidates(fns, warmed=False, screened=None, **halving):
            passed.append(screened)
            return base.time_candidates(fns, warmed=warmed, **halving)

        def call_times():
            clocks.append(FakeCallTimes(fake, {10: 1.0, 1: 3.0}, **(clock_kw or {})))
            return clocks[-1]

        ctx = replace(base, time_candidates=time_candidates, call_times=call_times if with_clock else None)
        prep = method.prepare(p, ctx)
        prep.close()
        return prep

    default = run(CublasLtAutotune())
    assert clocks == [] and passed == [None] and default.info["screened_by"] == "graph rounds"
    assert run(graph).info["screened_by"] == "graph rounds" and clocks == []

    prep = run(m)
    (clock,) = clocks
    assert clock.closed and prep.info["screened_by"] == "validation calls (CUPTI)"
    # the raising candidates left no call, the wrong one is not valid: the rest, in candidate order
    valid_algos = [clock.algo_of_call[i] for i in sorted(clock.algo_of_call) if clock.algo_of_call[i] != WRONG_ALGO]
    assert len(passed[-1]) == prep.info["candidates_valid"] == len(valid_algos)
    assert passed[-1] == [{10: 1.0, 1: 3.0}.get(algo, 10.0) for algo in valid_algos]
    assert prep.info["algo_id"] == 10  # the timing core's finals (5.0 us for id 10) decide, as before

    untraced = run(m, {"unavailable": "cupti-python not importable"})
    assert passed[-1] is None and clocks[-1].closed
    assert untraced.info["screened_by"] == "graph rounds (validation calls untimed: cupti-python not importable)"
    no_clock = run(m, with_clock=False)
    assert passed[-1] is None and "no kernel clock" in no_clock.info["screened_by"]
