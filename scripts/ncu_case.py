"""One method on one shape, for Nsight Compute: a warm-up call, then one call inside the NVTX
range ``timed`` (profile it with ``ncu --nvtx --nvtx-include timed/``: the prepare step's
kernels, e.g. cuBLASLt autotuning, and the warm-up stay out of the report).

    ncu --clock-control none --nvtx --nvtx-include timed/ --metrics ... \\
        python3 scripts/ncu_case.py splitk:reduce=3 256_128_16384 tn

Any ``--methods`` spec works (baselines, family configs). Inputs are uniform in [-0.5, 0.5).
"""

from __future__ import annotations

import sys

import torch

from harness.method import PrepareContext
from harness.problem import Problem
from harness.registry import resolve
from harness.shapes import parse_shapes
from harness.timing.offline import time_candidates


def main(spec: str, shape: str, layout: str = "nn") -> int:
    (m,) = resolve([spec])
    (s,) = parse_shapes(shape)
    p = Problem(s, layout)
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(p.m, p.k, device="cuda", generator=g).sub_(0.5).half()
    b = torch.rand(*p.b_shape, device="cuda", generator=g).sub_(0.5).half()
    c = torch.empty(p.m, p.n, device="cuda", dtype=torch.float16)
    # an autotuning method times its candidates with the harness's timing core, as compare does, so
    # the profiled call is the one it would pick (outside the NVTX range: ncu does not profile them)
    prep = m.prepare(p, PrepareContext(device="cuda", inputs=(a, b, c),
                                       time_candidates=lambda fns, **kw: time_candidates(fns, (a, b, c), "cuda", **kw)))
    prep.fn(a, b, c)  # warm-up: one-time attribute calls, lazy loading
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("timed")
    prep.fn(a, b, c)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"{m.name} {p}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
