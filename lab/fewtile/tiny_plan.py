"""Write a compare plan of the light kernels on the tiny grid shapes where the H200 evidence never measured them.

Why: on the H200 the `triton` tiny preset (16 x 64 x 64 tiles, 4 warps, one program a tile) beats the best of the
four baselines by 1.17-1.28x on every measured grid shape with K 64-128 and at most 131,072 outputs (at most 128
programs), and by 1.07-1.10x at K 256 (`python -m lab.fewtile.tiny_plan --pattern` prints the table). The packaged
library exports only what was measured, and on 69 grid shapes of that size (K <= 512) the preset never ran on an
H200: 16 of them hold the labelled fallback and 7 no entry, the rest a kernel recorded at 1.02-1.06x. This writes, per
such shape, the preset, a 32-row variant (half the programs on the larger outputs), `smalltile`'s preset and the
packaged library's own entry, beside the three baselines that the `plans` stage does not add (it adds
cuBLASLt autotune), so a re-export can take the winners (`lab/library/h200-sources.txt` plus the run).

    python3 -m lab.fewtile.tiny_plan > lab/fewtile/tiny-plan.txt
"""

from __future__ import annotations

import glob
import sys

TINY = "triton:block_m=16:block_n=64:block_k=64:group_m=1:num_warps=4:num_stages=4"
WIDER = "triton:block_m=32:block_n=64:block_k=64:group_m=1:num_warps=4:num_stages=4"
METHODS = ("library", TINY, WIDER, "smalltile:", "torch", "cublas", "cublaslt")
MAX_OUTPUTS = 262144  # 256 programs of 16 x 64: two a SM
MAX_K = 512


def measured_tiny(runs: str = "results/runs/*/*.parquet") -> dict[str, list[tuple[float, float]]]:
    """{shape: [(best baseline us, the tiny preset's us), one pair per H200 run that measured the preset]}."""
    import pandas as pd

    out: dict[str, list[tuple[float, float]]] = {}
    for f in sorted(glob.glob(runs)):
        try:
            df = pd.read_parquet(f, columns=["run_id", "gpu_name", "shape", "method", "is_baseline", "status",
                                             "device_us_median"])
        except Exception:
            continue
        df = df[(df["status"] == "ok") & df["gpu_name"].str.contains("H200")]
        tiny = df[df["method"].str.startswith("triton:block_m=16,block_n=64,block_k=64,group_m=1,num_warps=4,"
                                              "num_stages=4,split_k=1,persistent=0")]
        for (run, shape), g in tiny.groupby(["run_id", "shape"]):
            base = df[(df["run_id"] == run) & (df["shape"] == shape) & df["is_baseline"]]["device_us_median"].min()
            if base == base:  # not NaN
                out.setdefault(shape, []).append((float(base), float(g["device_us_median"].min())))
    return out


def candidates():
    """The grid shapes of the plan: at most MAX_OUTPUTS outputs, K <= MAX_K, the preset never measured on an H200."""
    from harness.shapes import resolve_shapes

    seen = measured_tiny()
    return [s for s in resolve_shapes(["cuda-l2"]).shapes
            if s.m * s.n <= MAX_OUTPUTS and s.k <= MAX_K and s.name not in seen]


def main(argv: list[str]) -> None:
    if argv[:1] == ["--pattern"]:
        for shape, pairs in sorted(measured_tiny().items(), key=lambda kv: tuple(map(int, kv[0].split("_")))[::-1]):
            m, n, k = map(int, shape.split("_"))
            ratios = sorted(b / t for b, t in pairs)
            print(f"{shape:>16}  outputs {m * n:>9}  K {k:>5}  best baseline / tiny preset: "
                  + " ".join(f"{r:.3f}" for r in ratios))
        return
    print("# written by lab/fewtile/tiny_plan.py (its docstring says why); run with PLAN_FILES=lab/fewtile/tiny-plan.txt "
          "bash scripts/gpu_check.sh plans")
    for s in candidates():
        print(s.name, ",".join(METHODS))


if __name__ == "__main__":
    main(sys.argv[1:])
