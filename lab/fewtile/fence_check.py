"""Wrong sums in the in-launch-sum kernels: the kernels as shipped against variants, side by side on the GPU.

The in-launch-sum kernels (`triton_streamk`, `triton_splitk`) add each program's fp32 partial into
its tile's accumulator; after a CTA barrier one thread moves the tile's counter (acq_rel, gpu scope),
and the last contributor reads the sum, writes C and zeroes the accumulator. Run 523abc79a060 (H100)
had 4 stream-K programs a SM give wrong sums on 34 of 156 shape-layouts. Variants:

- `nobarrier`: the kernel without the CTA barrier between the last contributor's read of the sum and
  its zeroing. Triton reads the sum in one thread layout (#blocked2: 4 rows a warp) and zeroes it in
  the adds' layout (#blocked: 2 rows a warp), so without the barrier a warp can zero rows another
  warp has not read yet (the shipped kernels have the barrier; `tests/test_kernels_build.py` checks it);
- `fence`: a `fence.acq_rel.gpu` by every thread after its partial adds (NVIDIA/Fuser PR 2391 fixed a
  split-K race so; it did not stop the wrong sums, `lab/fewtile/fence-check-h100.md`).

Each variant runs CALLS calls on shapes that failed, counts the calls whose output is wrong, and is
timed (`triton.testing.do_bench_cudagraph`, median, side by side in one process).

    python3 -m lab.fewtile.fence_check [--calls 30] [--per-sm 4 3] [--stages 3 2] [--variants shipped nobarrier]

(`--per-sm`: stream-K also at these programs a SM, each at each `--stages`; the plan is built here.)
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


BARRIER = "tl.debug_barrier()"


def _kernel(file: str, name: str, variant: str):
    """The kernel as shipped, or a copy of its file changed as ``variant`` says (its own module file:
    Triton compiles from the source text)."""
    path = ROOT / "kernels_search" / file
    src = path.read_text()
    lines = src.splitlines()
    if variant == "fence":
        add = [line for line in lines if line.lstrip().startswith("tl.atomic_add(acc_ptr, acc,")]
        assert len(add) == 1
        indent = add[0][:len(add[0]) - len(add[0].lstrip())]
        src = src.replace(add[0] + "\n", add[0] + "\n" + indent + FENCE + "\n")
    elif variant == "nobarrier":  # the barrier right before the zeroing store goes
        zero = [i for i, line in enumerate(lines) if line.lstrip().startswith("tl.store(acc_ptr, tl.zeros(")]
        assert len(zero) == 1 and lines[zero[0] - 1].strip() == BARRIER, "no barrier before the zeroing"
        del lines[zero[0] - 1]
        src = "\n".join(lines) + "\n"
    elif variant != "shipped":
        raise SystemExit(f"unknown variant {variant!r} (shipped, nobarrier, fence)")
    if variant != "shipped":
        path = Path(tempfile.mkdtemp()) / f"{variant}_{file}"
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"fc_{variant}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--per-sm", type=int, nargs="*", default=[])
    ap.add_argument("--stages", type=int, nargs="*", default=[3])
    ap.add_argument("--variants", nargs="*", default=["shipped", "nobarrier"])
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES))
    args = ap.parse_args()
    import torch
    from triton.testing import do_bench_cudagraph

    from harness.problem import Problem, Shape
    from kernels_search.families import ALL
    from kernels_search.triton_method import PLANS, workspace

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, {args.calls} calls a shape and layout")
    print("| family | config | variant | shape | wrong calls | worst rel. error | us (median) |")
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
        for variant in args.variants:
            kernel = _kernel(file, name, variant)
            for s in args.shapes:
                pr = Problem(Shape(*map(int, s.split("_"))), "tn")
                p = PLANS[family](pr, knobs, sms)
                ws, counts = workspace(p, "cuda")
                # what triton_method.launch passes between K and the strides
                run_args = (p.iters_per, p.dp_tiles) if p.iters_per else (p.split,)
                g = torch.Generator(device="cuda").manual_seed(0)
                wrong, worst = 0, 0.0
                for _ in range(args.calls):
                    a = torch.randn(pr.m, pr.k, device="cuda", generator=g).half()
                    b = torch.randn(*pr.b_shape, device="cuda", generator=g).half()
                    c = torch.full((pr.m, pr.n), float("nan"), device="cuda", dtype=torch.float16)
                    kernel[p.grid](a, b, c, ws, counts, p.m, p.n, p.k, *run_args, *p.strides, **p.consts)
                    ref = a.float() @ b.float().t()
                    err = ((c.float() - ref).norm() / ref.norm()).item()
                    worst = max(worst, err if err == err else float("inf"))
                    wrong += not err < 1e-3
                us = 1e3 * do_bench_cudagraph(
                    lambda: kernel[p.grid](a, b, c, ws, counts, p.m, p.n, p.k, *run_args, *p.strides, **p.consts),
                    rep=50)
                print(f"| {family} | {cfg} | {variant} | {s} | {wrong}/{args.calls} | {worst:.2e} "
                      f"| {us:.2f} |", flush=True)


if __name__ == "__main__":
    main()
