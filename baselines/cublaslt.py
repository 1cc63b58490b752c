"""The ``cublaslt`` baseline: ``cublasLtMatmul`` with the heuristic's top-1 algorithm.

What a library that calls cuBLASLt without tuning gets: one heuristic query in ``prepare``
(BEST_FIT, workspace up to cuBLAS's 32 MiB Hopper recommendation, the alignment of the harness's
buffers), then the timed call does only ``cublasLtMatmul``. The workspace allocated is exactly what
the chosen algorithm needs.
"""

from __future__ import annotations

import time
from typing import Any

from baselines import cuda_handles as ch
from baselines.lt_plan import LtPlan, algo_config
from baselines.operands import alignment, cublas_supports
from harness.method import PrepareContext, Prepared, Support
from harness.problem import Problem


def inputs_alignment(ctx: PrepareContext) -> int:
    """Alignment (bytes, <= 256) that every pointer of the harness's input set satisfies."""
    a, b, c = ctx.inputs
    return alignment(a.data_ptr() | b.data_ptr() | c.data_ptr())


def closer(plan: LtPlan, prepared_fn) -> Any:
    """Prepared.close: destroy descriptors and drop the workspace reference held by the call."""

    def close() -> None:
        plan.close()
        if hasattr(prepared_fn, "_keepalive"):
            prepared_fn._keepalive = None

    return close


class CublasLtHeuristic:
    name = "cublaslt"
    family = "baseline"
    source_hash = ""
    is_baseline = True
    devices = ("cuda",)

    def __init__(self, max_workspace: int = ch.CUBLAS_WORKSPACE_BYTES) -> None:
        self.max_workspace = max_workspace
        self.config: dict[str, Any] = {
            "api": "cublasLtMatmul",
            "compute_type": "CUBLAS_COMPUTE_32F",
            "scale_type": "CUDA_R_32F",
            "search": "heuristic top-1 (BEST_FIT)",
            "max_workspace_bytes": max_workspace,
        }

    def supports(self, problem: Problem, device: str) -> Support:
        return cublas_supports(problem, device)

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        t0 = time.perf_counter()
        device = ch.current_device()
        align = inputs_alignment(ctx)
        plan = LtPlan(problem, device, align)
        try:
            found = plan.best_fit(1, self.max_workspace)
            if len(found) == 0:
                raise RuntimeError(f"{problem}: cuBLASLt heuristic returned no algorithm")
            top1 = found[:1].copy()
            ws_bytes = int(top1["workspace_size"][0])
            fn = plan.make_fn(top1, ch.lt_workspace(ws_bytes, device))
        except Exception:
            plan.close()
            raise
        torch.cuda.synchronize(device)
        info = {
            "workspace_bytes": ws_bytes,
            "waves_count": float(top1["waves_count"][0]),
            "alignment_bytes": align,
            **algo_config(top1.ctypes.data),
        }
        return Prepared(fn=fn, setup_s=time.perf_counter() - t0, info=info, close=closer(plan, fn))
