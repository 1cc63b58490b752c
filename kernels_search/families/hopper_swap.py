"""``hopper_swap``: the hopper family's plain (one-pass, fp16 out) GEMM on the transposed problem.

C^T = B^T A^T through hopper.py's ``SWAP_AB`` substitution, with no K slices: the epilogue writes
C^T column-major, which is C's memory, so there is no fp32 slice buffer and no reduce kernel
(``splitk_tma_swap`` with ``slices=1`` pays both: 0.54-0.86x on the tall shapes, H200).

Why: tall, skinny shapes (M >= 2048, N <= 128) are memory-bound on A, and cuBLAS (cuBLASLt
autotune on the H200) runs them transposed: ``nvjet_sm90_hsh_64x192_64x6_2x1_v`` on 12288_128_1024
and 12288_128_8192 and ``..._64x64_64x13_2x1_v`` on 4096_128_2048, i.e. 64 rows of the transposed
problem (along N) by 192 or 64 columns (along M): about one wave of CTAs (2 x 64), with the two
CTAs along N in one cluster, so that the multicast A tile is read from memory once. Here tile_m
runs along N and tile_n along M, and cluster_m pairs the CTAs along N.

Only the knobs that matter for those shapes are exposed; the rest are fixed at the hopper
family's defaults (data-parallel tiles, heuristic raster). Deep pipelines (up to 12 stages of a
64x64 tile) are allowed: cuBLAS runs 13 on 4096_128_2048.
"""

from __future__ import annotations

from typing import Mapping

from kernels_search.families import hopper
from kernels_search.family import Knob

FIXED = {"tile_k": 64, "scheduler": "persistent", "raster": 0, "swizzle": 1, "sms": 0,
         "sk_splits": 1, "sk_decomp": 0, "sk_reduction": 0, "epi_n": 0}


def as_hopper(k: Mapping) -> dict:
    """This family's knobs as a full hopper-family config."""
    return dict(k) | FIXED


class HopperSwap(hopper.HopperView):
    # the same TMA needs as the plain kernel (hopper's supports): C^T's leading dimension is N, the
    # swapped operands' are N (B) and K (A)
    swap_ab = True

    def as_hopper(self, k: Mapping) -> dict:
        return as_hopper(k)


FAMILY = HopperSwap(
    name="hopper_swap",
    # 64x192, one CTA per tile: 12288_128_1024 1.01x, 12288_128_8192 0.99x (H200 sweeps;
    # the same tile persistent with pingpong 0.92x and 0.98x, with the cluster pair 0.90x and 0.97x);
    # 64x128 with 8 stages: 2 x 64 CTAs on M = 8192 (not measured on such a shape yet)
    presets=("tile_m=64:tile_n=192:cluster_m=1:cluster_n=1:schedule=single:stages=6",
             "tile_m=64:tile_n=128:cluster_m=1:cluster_n=1:schedule=single:stages=8"),
    knobs=(
        Knob("tile_m", (64, 128), 64, help="CTA tile along N (the transposed problem's M)"),
        Knob("tile_n", (64, 128, 192, 256, *hopper.ODD_TILE_N, *hopper.NARROW_TILE_N), 128,
             help="CTA tile along M (the transposed problem's N; hopper.ODD_TILE_N and NARROW_TILE_N as there)"),
        Knob("cluster_m", (2, 1), 2, help="CTAs along N sharing each A tile (TMA multicast)"),
        Knob("cluster_n", (1, 2), 1, help="CTAs along M sharing each B tile"),
        Knob("schedule", ("pingpong", "single", "cooperative"), "pingpong",
             help="as the hopper family's: persistent pingpong / cooperative, or one CTA per tile"),
        Knob("stages", (0, 4, 6, 8, 10, 12), 0, help="0 = as many as fit"),
        Knob("l2_promo", (0, *hopper.L2_PROMO_VALUES), 0,
             help="as the hopper family's: TMA L2 promotion, 0 = CUTLASS's 128 B"),
    ),
)
