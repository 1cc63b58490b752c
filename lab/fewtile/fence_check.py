"""Does the per-thread fence after the partial adds remove the wrong sums? Side by side on the GPU.

The in-launch-sum kernels (`triton_streamk`, `triton_splitk`) add each program's fp32 partial into
its tile's accumulator, then one thread moves the tile's counter, and the last contributor reads the
sum. Run 523abc79a060 (H100) had 4 stream-K programs a SM give wrong sums on 34 of 156
shape-layouts. The kernels now make every thread fence (`fence.acq_rel.gpu`) after its adds, before
the barrier. This runs each kernel as shipped and a copy with the fence compiled out, CALLS calls
each on the shapes that failed, counts the calls whose output is wrong, and times both
(`triton.testing.do_bench_cudagraph`, median, side by side in one process): what the fence costs.

    python3 -m lab.fewtile.fence_check [--calls 50]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ("256_512_8192", "64_4096_8192", "4096_64_1024", "2048_128_4096", "512_512_16384", "128_1024_16384")
CASES = (("triton_streamk", "block_m=64,block_n=64,per_sm=4", "streamk_kernel", "triton_streamk_kernel.py"),
         ("triton_streamk", "block_m=64,block_n=64,per_sm=2", "streamk_kernel", "triton_streamk_kernel.py"),
         ("triton_splitk", "block_m=64,block_n=64,split_k=16", "splitk_fixup_kernel", "triton_splitk_kernel.py"))


def _kernel(file: str, name: str, fence: bool):
    """The kernel as shipped, or a copy of its file with the fence compiled out (its own module file:
    Triton compiles from the source text)."""
    src = (ROOT / "kernels_search" / file).read_text()
    if not fence:
        assert src.count("if GPU_FENCE:") == 1
        src = src.replace("if GPU_FENCE:", "if False:")
    path = Path(tempfile.mkdtemp()) / f"nofence_{file}" if not fence else ROOT / "kernels_search" / file
    if not fence:
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"fc_{fence}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    import torch
    from triton.testing import do_bench_cudagraph

    from harness.problem import Problem, Shape
    from kernels_search.families import ALL
    from kernels_search.triton_method import PLANS, workspace

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, {args.calls} calls a shape and layout")
    print("| family | config | fence | shape | wrong calls | worst rel. error | us (median) |")
    print("|---|---|---|---|---|---|---|")
    for family, cfg, name, file in CASES:
        knobs = ALL[family].parse(cfg)
        for fence in (True, False):
            kernel = _kernel(file, name, fence)
            for s in SHAPES:
                pr = Problem(Shape(*map(int, s.split("_"))), "tn")
                p = PLANS[family](pr, knobs, sms)
                ws, counts = workspace(p, "cuda")
                g = torch.Generator(device="cuda").manual_seed(0)
                wrong, worst = 0, 0.0
                for _ in range(args.calls):
                    a = torch.randn(pr.m, pr.k, device="cuda", generator=g).half()
                    b = torch.randn(*pr.b_shape, device="cuda", generator=g).half()
                    c = torch.full((pr.m, pr.n), float("nan"), device="cuda", dtype=torch.float16)
                    kernel[p.grid](a, b, c, ws, counts, p.m, p.n, p.k, p.iters_per or p.split, *p.strides,
                                   **p.consts)
                    ref = a.float() @ b.float().t()
                    err = ((c.float() - ref).norm() / ref.norm()).item()
                    worst = max(worst, err if err == err else float("inf"))
                    wrong += not err < 1e-3
                us = 1e3 * do_bench_cudagraph(
                    lambda: kernel[p.grid](a, b, c, ws, counts, p.m, p.n, p.k, p.iters_per or p.split, *p.strides,
                                           **p.consts), rep=50)
                print(f"| {family} | {cfg} | {'yes' if fence else 'no'} | {s} | {wrong}/{args.calls} | {worst:.2e} "
                      f"| {us:.2f} |", flush=True)


if __name__ == "__main__":
    main()
