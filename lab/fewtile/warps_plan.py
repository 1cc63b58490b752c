"""Write two compare plans: the Triton tiny tiles with more warps a program (8 instead of 4).

Why: Nsight Compute on an H100 (`lab/fewtile/ncu-tiny-warps-h100.md`) shows the `triton` tiny preset (16 x 64,
4 warps) at 64_256_1024 issue-bound, not memory-bound: per issued instruction its warps stall 1.77 cycles on
fixed-latency dependencies (`wait`), 0.92 on shared memory (`short_scoreboard`), 0.73 on global memory
(`long_scoreboard`), 0.42 on barriers. A 16 x 64 tile on 4 warps puts one warp on each of the SM's four schedulers,
so no stall is hidden; 16 programs leave 116 of 132 SMs idle. With 8 warps (two a scheduler) each warp has half the
tile's MMAs and loads. The same holds for `triton_splitk`'s programs, which run few k-tiles each.

Plans:
- `warps-tiny-plan.txt`: the cuda-l2 grid shapes with K 512 or 1024 and at most 131,072 outputs; the tiny preset
  (control), 16 x 64 at 8 and at 2 warps, 16 x 128 and 32 x 64 at 8 warps, beside the library's entry and the
  baselines.
- `warps-splitk-plan.txt`: the deep-K class sample's shapes with at most 131,072 outputs; `triton_splitk`'s two
  presets (control) and the same tiles at 8 warps, beside the library's entry and the baselines.

    python3 -m lab.fewtile.warps_plan
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
TINY = "triton:block_m={bm}:block_n={bn}:block_k=64:group_m=1:num_warps={w}:num_stages=4"
TINY_CONFIGS = ((16, 64, 4), (16, 64, 8), (16, 64, 2), (16, 128, 8), (32, 64, 8))
SPLITK = "triton_splitk:block_m={bm}:block_n=64:block_k=64:num_warps={w}:num_stages={s}"
SPLITK_CONFIGS = ((64, 4, 3), (16, 4, 4), (64, 8, 3), (16, 8, 4))
MAX_OUTPUTS = 131072
TINY_KS = (512, 1024)
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune
RUN = "run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans"


def tiny_shapes():
    from harness.shapes import resolve_shapes

    return [s.name for s in resolve_shapes(["cuda-l2"]).shapes if s.m * s.n <= MAX_OUTPUTS and s.k in TINY_KS]


def splitk_shapes():
    from harness.shapes import resolve_shapes

    return [s.name for s in resolve_shapes([str(HERE / "deepk-60-seed3301.txt")]).shapes if s.m * s.n <= MAX_OUTPUTS]


def write(name: str, shapes, specs) -> None:
    methods = ",".join(("library", *specs, *BASELINES))
    text = [f"# written by lab/fewtile/warps_plan.py (its docstring says why); {RUN.format(name=name)}"]
    text += [f"{s} {methods}" for s in shapes]
    (HERE / name).write_text("\n".join(text) + "\n")
    print(f"{name}: {len(shapes)} shapes")


def main() -> None:
    write("warps-tiny-plan.txt", tiny_shapes(), [TINY.format(bm=bm, bn=bn, w=w) for bm, bn, w in TINY_CONFIGS])
    write("warps-splitk-plan.txt", splitk_shapes(), [SPLITK.format(bm=bm, w=w, s=s) for bm, w, s in SPLITK_CONFIGS])


if __name__ == "__main__":
    main()
