"""The ``cublas`` baseline: one ``cublasGemmEx`` call, the classic cuBLAS API with its default algo.

fp16 A/B/C, ``CUBLAS_COMPUTE_32F``, alpha = 1 and beta = 0 as host float32, ``CUBLAS_GEMM_DEFAULT``.
The row-major -> column-major argument mapping lives in ``baselines.mapping`` (tested on CPU).

Per call the handle is pointed at torch's current stream (so the call is captured inside
``torch.cuda.graph``) and then at our own workspace: ``cublasSetStream`` resets the workspace to
cuBLAS's internal pool, which may allocate, and allocation is not allowed during graph capture.
The workspace is one 32 MiB buffer per device, shared by every prepared ``cublas`` call: like any
single cuBLAS handle, calls must not run concurrently on different streams (the harness runs one
call at a time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines import cuda_handles as ch
from baselines.mapping import colmajor_gemm, gemm_ex_template
from baselines.operands import cublas_supports, make_checker
from harness.method import PrepareContext, Prepared, Support
from harness.problem import Problem


class CublasGemmEx:
    name = "cublas"
    family = "baseline"
    source_hash = ""
    is_baseline = True
    devices = ("cuda",)

    def __init__(self) -> None:
        self.config: dict[str, Any] = {
            "api": "cublasGemmEx",
            "compute_type": "CUBLAS_COMPUTE_32F",
            "algo": "CUBLAS_GEMM_DEFAULT",
            "math_mode": "CUBLAS_DEFAULT_MATH",
            "workspace_bytes": ch.CUBLAS_WORKSPACE_BYTES,
        }

    def supports(self, problem: Problem, device: str) -> Support:
        return cublas_supports(problem, device)

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import time

        import torch
        from nvmath.bindings import cublas

        t0 = time.perf_counter()
        device = ch.current_device()
        handle, workspace = ch.cublas_handle(device)
        ws_ptr, ws_bytes = workspace.data_ptr(), workspace.numel()
        g = colmajor_gemm(problem)
        scalars = np.array([1.0, 0.0], dtype=np.float32)  # host alpha, beta
        alpha_ptr = scalars.ctypes.data
        template, ia, ib, ic = gemm_ex_template(
            g,
            cublas.gemm_ex,
            handle=handle,
            alpha_ptr=alpha_ptr,
            beta_ptr=alpha_ptr + scalars.itemsize,
            data_type=ch.DATA_TYPES[problem.dtype],
            compute_type=ch.CUBLAS_COMPUTE_32F,
            algo=ch.CUBLAS_GEMM_DEFAULT,
        )
        gemm_ex, set_stream, set_workspace = cublas.gemm_ex, cublas.set_stream, cublas.set_workspace
        stream_ptr, check = ch.current_stream_ptr, make_checker(problem)

        def fn(a, b, c) -> None:
            check(a, b, c)
            args = template.copy()
            args[ia], args[ib], args[ic] = a.data_ptr(), b.data_ptr(), c.data_ptr()
            set_stream(handle, stream_ptr())
            set_workspace(handle, ws_ptr, ws_bytes)  # after set_stream, which resets it
            gemm_ex(*args)

        fn._keepalive = (scalars, workspace)  # type: ignore[attr-defined]
        torch.cuda.synchronize(device)
        return Prepared(
            fn=fn,
            setup_s=time.perf_counter() - t0,
            info={"transa": "T" if g.transa else "N", "workspace_bytes": ws_bytes},
        )
