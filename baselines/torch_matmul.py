"""The ``torch`` baseline: ``torch.matmul(a, b, out=c)``, what a PyTorch user gets by default.

For layout ``tn`` B is stored (N, K), so the call uses ``b.t()``: a view, no copy; torch hands
cuBLAS a transposed operand, exactly as a user multiplying by a transposed weight would. On CPU
the same call runs torch's CPU fp16 GEMM: that is the CPU path of the product (CI), labelled as
CPU results by the harness.
"""

from __future__ import annotations

from typing import Any

from harness.method import SUPPORTED, PrepareContext, Prepared, Support, unsupported
from harness.problem import Problem


class TorchMatmul:
    name = "torch"
    family = "baseline"
    source_hash = ""
    is_baseline = True
    devices = ("cuda", "cpu")

    def __init__(self) -> None:
        import torch

        self.config: dict[str, Any] = {"op": "torch.matmul(out=)", "torch": torch.__version__}

    def supports(self, problem: Problem, device: str) -> Support:
        if device.split(":")[0] not in self.devices:
            return unsupported(f"unsupported on {device}")
        return SUPPORTED

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        matmul = torch.matmul
        if problem.layout == "nn":

            def fn(a, b, c) -> None:
                matmul(a, b, out=c)

        else:

            def fn(a, b, c) -> None:
                matmul(a, b.t(), out=c)

        return Prepared(fn=fn, info={"b_operand": "b" if problem.layout == "nn" else "b.t()"})
