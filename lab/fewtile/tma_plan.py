"""Write two compare plans: `triton_splitk` with A and B through TMA descriptors (tma=1) beside its pointer loads.

Why: the few-tile kernels are latency-bound (Nsight Compute: DRAM under 6 %, `ncu-before-h200.md`), and
the issue's K-scaling study found each CTA pulling about 45 GB/s. The pointer kernel holds an address and a
mask per A and B element a thread and issues cp.async per 16 bytes; a TMA load is one instruction a tile,
so a program keeps its stages in flight with fewer registers and fewer issue slots, and 64 x 128 fits 4
warps (the pointer rule refuses it: 96 loads a thread). Each class shape (deepk-60, shallowk-60, seed 3301)
lists the library, the two presets with tma=0 and tma=1, 64 x 128 with tma=1, and the baselines, so
the same Parquets also serve the library's re-export (they hold the atomic2 plans' methods).

    python3 -m lab.fewtile.tma_plan
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TILES = ("block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3",
         "block_m=16:block_n=64:block_k=64:num_warps=4:num_stages=4")
WIDE = "block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=3:tma=1"
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune


def methods() -> list[str]:
    ours = [f"triton_splitk:{t}" for t in TILES] + [f"triton_splitk:{t}:tma=1" for t in TILES]
    return ["library", *ours, f"triton_splitk:{WIDE}", *BASELINES]


def main() -> None:
    from harness.shapes import resolve_shapes

    for cls in ("deepk", "shallowk"):
        name = f"tma-{cls}-plan.txt"
        shapes = resolve_shapes([str(HERE / f"{cls}-60-seed3301.txt")]).shapes
        head = (f"# written by lab/fewtile/tma_plan.py (its docstring says why); "
                f"run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans")
        (HERE / name).write_text("\n".join([head] + [f"{s.name} {','.join(methods())}" for s in shapes]) + "\n")
        print(f"{name}: {len(shapes)} shapes, {len(methods())} methods each")


if __name__ == "__main__":
    main()
