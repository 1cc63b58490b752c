"""Write a compare plan: `triton_splitk`'s slice count on the few-tile deep-K shapes with the fewest tiles.

Why: on the deepk-60 shapes of at most 16 output tiles (128 x 128) `triton_splitk` at its automatic split
wins 1.02-1.29x over the best baseline (H100, run 7fd2754108ad), yet stays 4-5x over the ~1 us floor. The
automatic split fills one wave with slices of as few as 2 k-tiles: on 128_64_4096 at 64 x 64, 32 slices
of 2 k-tiles each add a 16 KB partial into the same tile, 32 contributors on each accumulator. If the
adds' contention and each slice's fixed latency (first load, barrier, counter) dominate, fewer, longer
slices are faster. Each shape lists the automatic split and 4, 8, 16, 32 slices at the 64 x 64 and
16 x 64 tiles.

    python3 -m lab.fewtile.split_depth_plan
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TILES = ("block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3",
         "block_m=16:block_n=64:block_k=64:num_warps=4:num_stages=4")
SPLITS = (0, 4, 8, 16, 32)
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune
MAX_TILES = 16  # output tiles of 128 x 128


def main() -> None:
    from harness.shapes import resolve_shapes

    shapes = [s for s in resolve_shapes([str(ROOT / "lab/fewtile/deepk-60-seed3301.txt")]).shapes
              if -(-s.m // 128) * -(-s.n // 128) <= MAX_TILES]
    methods = [f"triton_splitk:{t}:split_k={k}" for t in TILES for k in SPLITS] + list(BASELINES)
    name = "split-depth-plan.txt"
    lines = [f"# written by lab/fewtile/split_depth_plan.py (its docstring says why); "
             f"run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans"]
    lines += [f"{s.name} {','.join(methods)}" for s in shapes]
    (HERE / name).write_text("\n".join(lines) + "\n")
    print(f"{name}: {len(shapes)} shapes, {len(methods)} methods each")


if __name__ == "__main__":
    main()
