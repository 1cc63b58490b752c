"""The ``inductor`` peer: ``torch.compile`` of ``torch.mm``, what a PyTorch user tries after eager.

Not a cuBLAS-family baseline (``is_baseline`` False, family ``peer``): it is measured and ranked
like any method, but never anchors the gate's tolerance nor counts as "the best baseline" a
search is rewarded against. It may pick Inductor's Triton GEMM templates over cuBLAS per shape.

Per shape and layout, ``prepare`` compiles ``torch.mm(a, b, out=c)`` (``b.t()`` for ``tn``, as
the ``torch`` baseline) with ``mode="max-autotune-no-cudagraphs"`` (the harness captures its own
CUDA graphs; Inductor's would nest), ``fullgraph=True`` (a graph break raises instead of running
eagerly) and ``dynamic=False`` (one kernel choice per shape, as a user with static shapes gets),
then calls it once: that first call compiles and autotunes, and its seconds are the row's
``compile_s``. The CPU path uses the same mode: Inductor then autotunes its C++ GEMM templates
against aten and compiles them with the host C++ compiler.

Each prepare compiles a function with its own code object: Dynamo keeps its compiled entries per
code object and, past ``recompile_limit`` (8) shapes of one function, would silently run it
eagerly; a fresh code object per shape keeps every shape compiled.
"""

from __future__ import annotations

import time
import types
from typing import Any

from harness.method import SUPPORTED, PrepareContext, Prepared, Support, unsupported
from harness.problem import Problem

MODE = "max-autotune-no-cudagraphs"
FAMILY = "peer"  # another tool's GEMM a user might pick instead; not part of the cuBLAS family


def _mm_nn(a, b, c) -> None:
    import torch

    torch.mm(a, b, out=c)


def _mm_tn(a, b, c) -> None:
    import torch

    torch.mm(a, b.t(), out=c)


def _fresh(fn, tag: str):
    """``fn`` with a code object of its own (see the module docstring)."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name)


def _cache_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {k: int(v) for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}


class Inductor:
    name = "inductor"
    family = FAMILY
    source_hash = ""
    is_baseline = False
    devices = ("cuda", "cpu")

    def __init__(self) -> None:
        import torch

        self.config: dict[str, Any] = {"op": "torch.compile(torch.mm(out=))", "mode": MODE, "fullgraph": True,
                                       "dynamic": False, "torch": torch.__version__}

    def supports(self, problem: Problem, device: str) -> Support:
        if device.split(":")[0] not in self.devices:
            return unsupported(f"unsupported on {device}")
        return SUPPORTED

    def prepare(self, problem: Problem, ctx: PrepareContext) -> Prepared:
        import torch

        t0 = time.perf_counter()
        template = _mm_nn if problem.layout == "nn" else _mm_tn
        fn = torch.compile(_fresh(template, f"{problem.m}_{problem.n}_{problem.k}"), mode=MODE,
                           fullgraph=True, dynamic=False)
        before = _cache_counts()
        t1 = time.perf_counter()
        fn(*ctx.inputs)  # compiles and autotunes for this shape
        if ctx.device == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        after = _cache_counts()
        cache = {k.removeprefix("fxgraph_cache_"): after[k] - before.get(k, 0) for k in after
                 if after[k] != before.get(k, 0)}
        return Prepared(fn=fn, setup_s=t2 - t0, compile_s=t2 - t1,
                        info={"mode": MODE, "b_operand": "b" if problem.layout == "nn" else "b.t()",
                              "fx_graph_cache": cache})
