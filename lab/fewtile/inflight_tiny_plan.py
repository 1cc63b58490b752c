"""Write a compare plan: the `triton` tiny tile with all of K in flight, on the tiny grid shapes with K 256-1024.

Why: in run 129 (H100, `tiny-plan-h100.md`) the tiny preset (16 x 64 tiles, block_k 64, 4 stages: three k-tiles
in flight) beats the best baseline by 1.17x where K <= 128 and loses 4-5 % for each doubling of K beyond: from K 256
to 512 every added 64 of K costs it about 0.16 us (290 cycles), against about 190 cycles to move a k-tile's 10 KB
into one SM at the 53 B/cycle the fetch probe measured (`fetch-probe-h200.txt`). If that step is a chain of load
latencies (three loads in flight cover about 700 cycles of L2 latency only in part), a k-tile of 128 and 5 stages
(all of K <= 512 issued at once) removes the chain, and the shapes stay one program a tile. Configs, all 4 warps and
within the family's register rule: the preset (control), 16 x 64 at block_k 64 with 6 stages, 16 x 64 / 32 x 64 /
16 x 32 at block_k 128 with 5 stages; beside the library's entry and the three baselines the `plans` stage does not
add (it adds cuBLASLt autotune).

    python3 -m lab.fewtile.inflight_tiny_plan > lab/fewtile/inflight-tiny-plan.txt
"""

from __future__ import annotations

PRESET = "triton:block_m=16:block_n=64:block_k=64:group_m=1:num_warps=4:num_stages=4"
VARIANTS = (
    "triton:block_m=16:block_n=64:block_k=64:group_m=1:num_warps=4:num_stages=6",
    "triton:block_m=16:block_n=64:block_k=128:group_m=1:num_warps=4:num_stages=5",
    "triton:block_m=32:block_n=64:block_k=128:group_m=1:num_warps=4:num_stages=5",
    "triton:block_m=16:block_n=32:block_k=128:group_m=1:num_warps=4:num_stages=5",
)
METHODS = ("library", PRESET, *VARIANTS, "torch", "cublas", "cublaslt")
MAX_OUTPUTS = 262144  # 256 programs of 16 x 64: two a SM
KS = (256, 512, 1024)


def candidates():
    from harness.shapes import resolve_shapes

    return [s for s in resolve_shapes(["cuda-l2"]).shapes if s.m * s.n <= MAX_OUTPUTS and s.k in KS]


def main() -> None:
    print("# written by lab/fewtile/inflight_tiny_plan.py (its docstring says why); run with "
          "PLAN_FILES=lab/fewtile/inflight-tiny-plan.txt bash scripts/gpu_check.sh plans")
    for s in candidates():
        print(s.name, ",".join(METHODS))


if __name__ == "__main__":
    main()
