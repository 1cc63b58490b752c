"""One problem's cuBLASLt state: descriptors, heuristic queries, and the call itself.

An ``LtPlan`` is built once in ``prepare``: the matmul descriptor (compute 32F, scale 32F, the
transposes of ``baselines.mapping``), three matrix layouts (A, B, and C which doubles as D), and
host alpha/beta. It answers heuristic queries (``best_fit``, ``by_algo_id``) and builds the timed
call (``make_fn``), which does only ``cublasLtMatmul`` on torch's current stream with a workspace
allocated here, so it can be captured in a CUDA graph.

Alignment. cuBLASLt picks algorithms assuming each pointer is aligned to the MIN_ALIGNMENT_*
preferences (default 256 bytes); an algorithm chosen for 256-byte pointers may refuse or misbehave
on less aligned ones. We prepare for the alignment of the harness's own buffers (``ctx.inputs``,
usually 256) and, at call time, compare the actual pointers' alignment; a less aligned call (an
offset view, say) uses the heuristic's top-1 for that alignment, chosen once per alignment within
the workspace already allocated (no allocation, so still capturable) and recorded in ``info``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from baselines import cuda_handles as ch
from baselines.mapping import colmajor_gemm, lt_operand_ptrs
from baselines.operands import MAX_ALIGNMENT, alignment, make_checker
from harness.problem import Problem

# CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA: non-tensor-core (SIMT FMA) implementations.
IMPL_FLAGS_FMA = 0x1
ALL_IMPLS = (1 << 64) - 1

_RESULT_DTYPE = None


def result_dtype():
    """numpy dtype of ``cublasLtMatmulHeuristicResult_t`` (algo first, 96 bytes), from nvmath."""
    global _RESULT_DTYPE
    if _RESULT_DTYPE is None:
        from nvmath.bindings import cublasLt

        _RESULT_DTYPE = cublasLt.matmul_heuristic_result_dtype
        assert _RESULT_DTYPE.fields["algo"][1] == 0, "algo must be the first field"
    return _RESULT_DTYPE


def _set(setter: Callable, dtype_of: Callable, obj: int, attr, value) -> None:
    """Set one cuBLASLt attribute through nvmath, with the C type nvmath says the attribute has."""
    buf = np.array([value], dtype=dtype_of(attr))
    setter(obj, int(attr), buf.ctypes.data, buf.nbytes)


def algo_config(algo_ptr: int) -> dict[str, int]:
    """The algorithm's configuration (id, tile, stages, split-K...) as plain ints, for results."""
    from nvmath.bindings import cublasLt as lt

    out: dict[str, int] = {}
    written = np.zeros(1, dtype=np.uint64)
    for attr in lt.MatmulAlgoConfigAttribute:
        try:
            buf = np.zeros(1, dtype=lt.get_matmul_algo_config_attribute_dtype(attr))
            lt.matmul_algo_config_get_attribute(
                algo_ptr, int(attr), buf.ctypes.data, buf.nbytes, written.ctypes.data
            )
            out[f"algo_{attr.name.lower()}"] = int(buf[0])
        except Exception:  # attribute absent from this cuBLAS version: leave the column out
            continue
    return out


class LtPlan:
    """Descriptors and layouts of one problem; see the module docstring."""

    def __init__(self, problem: Problem, device: int, alignment_bytes: int = MAX_ALIGNMENT):
        from nvmath.bindings import cublasLt as lt

        self.lt = lt
        self.problem = problem
        self.device = device
        self.alignment = alignment_bytes
        self.handle = ch.cublaslt_handle(device)
        self.g = colmajor_gemm(problem)
        self.data_type = ch.DATA_TYPES[problem.dtype]
        self._closed = False
        self.desc = 0
        self.layouts: list[int] = []
        try:
            self.desc = lt.matmul_desc_create(ch.CUBLAS_COMPUTE_32F, ch.CUDA_R_32F)
            setd = lt.matmul_desc_set_attribute
            dtyped = lt.get_matmul_desc_attribute_dtype
            _set(setd, dtyped, self.desc, lt.MatmulDescAttribute.TRANSA, self.g.transa)
            _set(setd, dtyped, self.desc, lt.MatmulDescAttribute.TRANSB, self.g.transb)
            for mat in (self.g.a, self.g.b, self.g.c):
                self.layouts.append(lt.matrix_layout_create(self.data_type, mat.rows, mat.cols, mat.ld))
        except Exception:
            self.close()
            raise
        self.adesc, self.bdesc, self.cdesc = self.layouts
        self.scalars = np.array([1.0, 0.0], dtype=np.float32)  # host alpha, beta
        self.alpha_ptr = self.scalars.ctypes.data
        self.beta_ptr = self.alpha_ptr + self.scalars.itemsize
        self._fallbacks: dict[tuple[int, int], np.ndarray] = {}

    # -- heuristic queries -------------------------------------------------------------------

    def _preference(
        self,
        max_workspace: int,
        align: int,
        search_mode: int = 0,
        impl_mask: int = ALL_IMPLS,
        reduction_mask: int | None = None,
    ) -> int:
        lt = self.lt
        pref = lt.matmul_preference_create()
        try:
            P = lt.MatmulPreferenceAttribute
            setp, dtypep = lt.matmul_preference_set_attribute, lt.get_matmul_preference_attribute_dtype
            _set(setp, dtypep, pref, P.MAX_WORKSPACE_BYTES, max_workspace)
            for attr in (P.MIN_ALIGNMENT_A_BYTES, P.MIN_ALIGNMENT_B_BYTES, P.MIN_ALIGNMENT_C_BYTES,
                         P.MIN_ALIGNMENT_D_BYTES):
                _set(setp, dtypep, pref, attr, align)
            if search_mode:
                _set(setp, dtypep, pref, P.SEARCH_MODE, search_mode)
            if impl_mask != ALL_IMPLS:
                _set(setp, dtypep, pref, P.IMPL_MASK, impl_mask)
            if reduction_mask is not None:
                _set(setp, dtypep, pref, P.REDUCTION_SCHEME_MASK, reduction_mask)
        except Exception:
            lt.matmul_preference_destroy(pref)
            raise
        return pref

    def _query(self, pref: int, count: int, algo_id: int | None = None) -> np.ndarray:
        """Run the heuristic; return the successful results (``state == 0``) in its rank order."""
        lt = self.lt
        results = np.zeros(count, dtype=result_dtype())
        if algo_id is not None:  # LIMITED_BY_ALGO_ID reads the algo id from each result slot
            base, size = results.ctypes.data, results.itemsize
            for i in range(count):
                lt.matmul_algo_init(
                    self.handle,
                    ch.CUBLAS_COMPUTE_32F,
                    ch.CUDA_R_32F,
                    self.data_type,
                    self.data_type,
                    self.data_type,
                    self.data_type,
                    algo_id,
                    base + i * size,
                )
        returned = np.zeros(1, dtype=np.int32)
        try:
            lt.matmul_algo_get_heuristic(
                self.handle,
                self.desc,
                self.adesc,
                self.bdesc,
                self.cdesc,
                self.cdesc,
                pref,
                count,
                results.ctypes.data,
                returned.ctypes.data,
            )
        except lt.cuBLASLtError:  # CUBLAS_STATUS_NOT_SUPPORTED: no algorithm fits the request
            return results[:0]
        found = results[: int(returned[0])]
        return found[found["state"] == 0]

    def best_fit(
        self, count: int, max_workspace: int, align: int | None = None, reduction_mask: int | None = None
    ) -> np.ndarray:
        """The heuristic's ranked list (``CUBLASLT_SEARCH_BEST_FIT``), up to ``count`` results.

        ``reduction_mask`` restricts split-K reduction schemes (``CUBLASLT_REDUCTION_SCHEME_*``;
        0 = no split-K); None keeps cuBLASLt's default (all schemes).
        """
        pref = self._preference(max_workspace, align or self.alignment, reduction_mask=reduction_mask)
        try:
            return self._query(pref, count)
        finally:
            self.lt.matmul_preference_destroy(pref)

    def algo_ids(self, limit: int = 1024) -> tuple[int, ...]:
        """Every algorithm id cuBLASLt has for this type combination (fp16 in/out, 32F compute)."""
        dt = self.data_type
        return tuple(
            self.lt.matmul_algo_get_ids(
                self.handle, ch.CUBLAS_COMPUTE_32F, ch.CUDA_R_32F, dt, dt, dt, dt, limit
            )
        )

    def by_algo_id(self, algo_id: int, count: int, max_workspace: int, impl_mask: int = ALL_IMPLS) -> np.ndarray:
        """Configurations of one algorithm id (``CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID``)."""
        limited = int(self.lt.MatmulSearch.LIMITED_BY_ALGO_ID)
        pref = self._preference(max_workspace, self.alignment, search_mode=limited, impl_mask=impl_mask)
        try:
            return self._query(pref, count, algo_id=algo_id)
        finally:
            self.lt.matmul_preference_destroy(pref)

    # -- the call ----------------------------------------------------------------------------

    def _fallback(self, align: int, ws_bytes: int) -> np.ndarray:
        key = (align, ws_bytes)
        if key not in self._fallbacks:
            found = self.best_fit(1, ws_bytes, align=align)
            if len(found) == 0:
                raise RuntimeError(f"{self.problem}: no cuBLASLt algorithm for {align}-byte aligned pointers")
            self._fallbacks[key] = found
        return self._fallbacks[key]

    def make_fn(self, result: np.ndarray, workspace, fallback: bool = True) -> Callable[[Any, Any, Any], None]:
        """The timed call for one heuristic result (a 1-element results array) and a workspace tensor.

        ``workspace`` must hold at least ``result['workspace_size']`` bytes; the call passes its
        full size. Both are kept alive by the returned function. With ``fallback=False`` (autotune
        candidates, which must run as themselves) pointers less aligned than the plan's raise
        ValueError instead of switching algorithm.
        """
        need = int(result["workspace_size"][0])
        ws_ptr, ws_bytes = workspace.data_ptr(), workspace.numel()
        if ws_bytes < need:
            raise ValueError(f"workspace of {ws_bytes} bytes < the {need} the algorithm needs")
        algo_ptr = result.ctypes.data  # algo is the struct's first field
        matmul, stream_ptr = self.lt.matmul, ch.current_stream_ptr
        handle, desc, adesc, bdesc, cdesc = self.handle, self.desc, self.adesc, self.bdesc, self.cdesc
        alpha_ptr, beta_ptr, g, align = self.alpha_ptr, self.beta_ptr, self.g, self.alignment
        plan, check = self, make_checker(self.problem)

        def fn(a, b, c) -> None:
            check(a, b, c)
            a_ptr, b_ptr, c_ptr = a.data_ptr(), b.data_ptr(), c.data_ptr()
            algo = algo_ptr
            if alignment(a_ptr | b_ptr | c_ptr) < align:
                got = alignment(a_ptr | b_ptr | c_ptr)
                if not fallback:
                    raise ValueError(f"pointers aligned to {got} bytes; this algorithm was chosen for {align}")
                algo = plan._fallback(got, ws_bytes).ctypes.data
            arg_a, arg_b = lt_operand_ptrs(g, a_ptr, b_ptr)
            matmul(
                handle, desc,
                alpha_ptr, arg_a, adesc, arg_b, bdesc,
                beta_ptr, c_ptr, cdesc, c_ptr, cdesc,  # C (unread: beta = 0) and D are our C
                algo, ws_ptr, ws_bytes, stream_ptr(),
            )  # fmt: skip

        fn._keepalive = (result, workspace, self)  # type: ignore[attr-defined]
        return fn

    def close(self) -> None:
        """Destroy the descriptors (idempotent). Workspaces are torch tensors, freed with their owners."""
        if self._closed:
            return
        self._closed = True
        for layout in getattr(self, "layouts", []):
            self.lt.matrix_layout_destroy(layout)
        self.layouts = []
        if self.desc:
            self.lt.matmul_desc_destroy(self.desc)
            self.desc = 0
