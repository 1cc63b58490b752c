"""Which GPU kernels a method launches on a shape, and how long each runs inside the call.

For each (spec, shape) the method is prepared as `compare` prepares it (cuBLASLt autotune times
its candidates with the harness's timing core), then:
- ``call us``: device time per call from the offline sampler (CUDA-graph replay of a batch),
  the number `compare` reports;
- the kernels of 20 calls under ``torch.profiler``: name, count per call, mean duration.
``call us`` minus the summed kernel durations is what a call costs between kernels (the launch
gap in a graph, a second kernel's ramp-up). The kernel names of cuBLAS say which tile, cluster
and split it chose: the configs our families must match before they can beat it.

    python3 scripts/kernel_profile.py --specs cublaslt-autotune,hopper:tile_n=128 \\
        --shapes 8192_256_512,256_12288_128 [--layout tn] [--out profile.md]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import torch

from harness.method import PrepareContext
from harness.problem import Problem
from harness.registry import resolve
from harness.shapes import parse_shapes
from harness.tensors import timing_sets
from harness.timing.offline import time_candidates
from harness.timing.samplers import make_sampler

PROFILED_CALLS = 20


def profile_one(spec: str, shape: str, layout: str) -> list[str]:
    (m,) = resolve([spec])
    (s,) = parse_shapes(shape)
    p = Problem(s, layout)
    (inputs,) = timing_sets(p, "cuda", 1, seed=0)  # compare's timing inputs, one set
    a, b, c = inputs.a, inputs.b, inputs.c
    ctx = PrepareContext(device="cuda", inputs=(a, b, c),
                         time_candidates=lambda fns, **kw: time_candidates(fns, (a, b, c), "cuda", **kw))
    prep = m.prepare(p, ctx)
    sampler = make_sampler(prep.fn, [inputs], "cuda", prep.capturable)
    call_us = sorted(sampler.sample() for _ in range(7))[3]
    sampler.close()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED_CALLS):
            prep.fn(a, b, c)
        torch.cuda.synchronize()
    per: dict[str, list[float]] = defaultdict(list)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time_total > 0:
            per[ev.name].append(ev.device_time_total)
    rows = []
    total = sum(sum(v) for v in per.values()) / PROFILED_CALLS
    for name, ds in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        rows.append(f"| {shape} | {layout} | {m.name[:70]} {_info(prep.info)} | {call_us:.2f} | {total:.2f} | "
                    f"{len(ds) / PROFILED_CALLS:.0f} | {sum(ds) / len(ds):.2f} | `{name[:150]}` |")
    return rows


def _info(info: dict) -> str:
    """The chosen-algorithm fields a method recorded (cuBLASLt's algo id, tile, stages...)."""
    keep = {k: v for k, v in info.items() if any(t in k for t in ("algo", "tile", "stages", "split", "cluster"))}
    return f"({', '.join(f'{k}={v}' for k, v in keep.items())})" if keep else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--specs", required=True, help="comma-separated --methods specs")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--layout", default="tn")
    ap.add_argument("--out", default=None, help="also write the table here")
    args = ap.parse_args()
    lines = ["| shape | layout | method | call us (graph) | kernels us | launches/call | kernel us | kernel |",
             "|---|---|---|---|---|---|---|---|"]
    for shape in args.shapes.split(","):
        for spec in args.specs.split(","):
            try:
                lines += profile_one(spec, shape, args.layout)
            except Exception as e:  # one failing method does not lose the others' rows
                lines.append(f"| {shape} | {args.layout} | {spec} | error: {type(e).__name__}: {e} | | | | |")
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
