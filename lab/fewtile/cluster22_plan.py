"""Write a compare plan: CUTLASS `hopper` 128 x 128 tiles in 2 x 2 clusters against the same tile in 2 x 1.

Why: on the few-tile shapes that are compute-sized (K >= 1024, 16-128 output tiles of 128 x 128, 5-85 us),
cuBLAS runs at 0.51-0.75 of the floor and no family config measured beats it. A 128 x 128 tile over K
pulls (128 + 128) x K x 2 bytes from L2; 128 such tiles on 1024_2048_8192 pull 537 MB, 403 MB when a
2 x 1 cluster multicasts the shared operand (cuBLAS's nvjet kernels carry 2 x 1 / 1 x 2 clusters), and at
the L2-to-SM rate the H200 fetch probe reached (7.4 TB/s, `fetch-probe-h200.txt`) 403 MB take 54 us:
cuBLAS's own time there is 47-51 us. A 2 x 2 cluster multicasts both operands and pulls 268 MB (36 us,
about the FLOP floor). The packaged H200 evidence holds no `hopper` config with a 2 x 2 cluster.
Each planned shape lists the library, 2 x 2 and 2 x 1 clusters under the persistent and the split-K
schedulers (one wave), 2 x 2 pingpong and stream-K, and the baselines.

    python3 -m lab.fewtile.cluster22_plan
"""

from __future__ import annotations

import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
T = "hopper:tile_m=128:tile_n=128"
CONFIGS = (
    f"{T}:cluster_m=2:cluster_n=2:schedule=cooperative",
    f"{T}:cluster_m=2:cluster_n=1:schedule=cooperative",
    f"{T}:cluster_m=2:cluster_n=2:schedule=pingpong",
    f"{T}:cluster_m=2:cluster_n=2:schedule=cooperative:scheduler=splitk:sk_splits=-1",
    f"{T}:cluster_m=2:cluster_n=1:schedule=cooperative:scheduler=splitk:sk_splits=-1",
    f"{T}:cluster_m=2:cluster_n=2:schedule=cooperative:scheduler=streamk",
)
BASELINES = ("torch", "cublas", "cublaslt")  # the plans stage adds cuBLASLt autotune


def wanted(m: int, n: int, k: int) -> bool:
    """Compute-sized few-tile shapes: 16-128 tiles of 128 x 128 in whole 2 x 2 clusters, K >= 1024."""
    tm, tn = math.ceil(m / 128), math.ceil(n / 128)
    return 16 <= tm * tn < 132 and tm % 2 == 0 and tn % 2 == 0 and k >= 1024


def main() -> None:
    from harness.shapes import resolve_shapes

    shapes = [s for cls in ("deepk", "shallowk")
              for s in resolve_shapes([str(HERE / f"{cls}-60-seed3301.txt")]).shapes if wanted(s.m, s.n, s.k)]
    name = "cluster22-plan.txt"
    head = (f"# written by lab/fewtile/cluster22_plan.py (its docstring says why); "
            f"run with PLAN_FILES=lab/fewtile/{name} bash scripts/gpu_check.sh plans")
    methods = ",".join(("library", *CONFIGS, *BASELINES))
    (HERE / name).write_text("\n".join([head] + [f"{s.name} {methods}" for s in shapes]) + "\n")
    print(f"{name}: {len(shapes)} shapes: {' '.join(s.name for s in shapes)}")


if __name__ == "__main__":
    main()
