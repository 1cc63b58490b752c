"""Would a fence by every thread after its partial adds remove the wrong sums? Side by side on the GPU.

The in-launch-sum kernels (`triton_streamk`, `triton_splitk`) add each program's fp32 partial into
its tile's accumulator; after a CTA barrier one thread moves the tile's counter (acq_rel, gpu scope),
and the last contributor reads the sum. Run 523abc79a060 (H100) had 4 stream-K programs a SM give
wrong sums on 34 of 156 shape-layouts. The barrier orders the threads, not their adds still in
flight, so one suspect was a missing `fence.acq_rel.gpu` by each thread after its adds (NVIDIA/Fuser
PR 2391 fixed a split-K race so). This runs each kernel as shipped and a copy with that fence
inserted, CALLS calls each on shapes that failed, counts the calls whose output is wrong, and times
both (`triton.testing.do_bench_cudagraph`, median, side by side in one process).

    python3 -m lab.fewtile.fence_check [--calls 30] [--per-sm 4 3] [--stages 3 2]

(`--per-sm`: stream-K also at these programs a SM, values the family no longer offers (4 gave the wrong
sums; 3 keeps every program of those shapes resident at once), each at each `--stages`; the plan is
built here. Hypotheses to tell apart: runs shorter than the pipeline, programs not all resident,
contention on the tile's adds.)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ("256_512_8192", "64_4096_8192", "4096_64_1024", "2048_128_4096", "512_512_16384", "128_1024_16384")
CASES = (("triton_streamk", "block_m=64,block_n=64,per_sm=2", "streamk_kernel", "triton_streamk_kernel.py"),
         ("triton_splitk", "block_m=64,block_n=64,split_k=16", "splitk_fixup_kernel", "triton_splitk_kernel.py"))


FENCE = ('tl.inline_asm_elementwise("fence.acq_rel.gpu;\\n\\tmov.u32 $0, 0;", "=r", [], dtype=tl.int32, '
         'is_pure=False, pack=1)')


def _kernel(file: str, name: str, fence: bool):
    """The kernel as shipped, or a copy of its file with a fence by every thread right after the partial
    adds (its own module file: Triton compiles from the source text)."""
    src = (ROOT / "kernels_search" / file).read_text()
    path = ROOT / "kernels_search" / file
    if fence:
        add = [line for line in src.splitlines() if line.lstrip().startswith("tl.atomic_add(acc_ptr, acc,")]
        assert len(add) == 1
        indent = add[0][:len(add[0]) - len(add[0].lstrip())]
        src = src.replace(add[0] + "\n", add[0] + "\n" + indent + FENCE + "\n")
        path = Path(tempfile.mkdtemp()) / f"fence_{file}"
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"fc_{fence}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--per-sm", type=int, nargs="*", default=[])
    ap.add_argument("--stages", type=int, nargs="*", default=[3])
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
    cases = [(f, c, n, fl, None) for f, c, n, fl in CASES]
    for per_sm in args.per_sm:
        for stages in args.stages:
            cases.insert(0, ("triton_streamk", f"block_m=64,block_n=64,num_stages={stages},per_sm={per_sm}",
                             "streamk_kernel", "triton_streamk_kernel.py", per_sm))
    for family, cfg, name, file, per_sm in cases:
        if per_sm is not None:  # not a knob value any more: the knobs at 2 programs a SM, then per_sm replaced
            knobs = {**ALL[family].parse(cfg.replace(f"per_sm={per_sm}", "per_sm=2")), "per_sm": per_sm}
        else:
            knobs = ALL[family].parse(cfg)
        for fence in (False, True):
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
