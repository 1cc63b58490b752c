"""``splitk_tma``: parallel split-K on the CUTLASS sm90 TMA + WGMMA mainloop, as a small family.

The kernel is the hopper family's ``scheduler=splitk`` (templates/hopper_cutlass.cu with
HG_SPLITK): K cut into equal slices that run as the batches of one persistent GEMM into fp32,
summed in order and cast by a second kernel launched as a programmatic dependent launch, both
inside the timed call. This family exposes only the knobs that mattered on the H200 for
few-tile, large-K shapes (tile, cluster, schedule, slice count):
about 220 valid configs (54 binaries), few enough that the search's learner ranks all of them for
every shape, where it only samples the hopper family's space (stages, SM limits, swizzle,
raster, stream-K options...). Raster order stays at the heuristic and the slice counts are
those the H200 sweeps found best (4, 8, 16) plus automatic.
Everything else is the hopper family's: the same rules, the same shape support (TMA needs K and N
multiples of 8; the slice count must cut K into multiples of 8), the same runtime options.
"""

from __future__ import annotations

from typing import Mapping

from kernels_search.families import hopper
from kernels_search.family import Knob

# the hopper knobs this family does not expose, fixed at what the H200 sweeps used
FIXED = {"tile_k": 64, "stages": 0, "scheduler": "splitk", "raster": 0, "swizzle": 1, "sms": 0,
         "sk_decomp": 0, "sk_reduction": 0, "epi_n": 0, "l2_promo": 0}


def as_hopper(k: Mapping) -> dict:
    """This family's knobs as a full hopper-family config (``slices`` is hopper's ``sk_splits``)."""
    full = {key: v for key, v in k.items() if key != "slices"}
    full.update(FIXED, sk_splits=k["slices"])
    return full


class SplitKTma(hopper.HopperView):
    def as_hopper(self, k: Mapping) -> dict:
        return as_hopper(k)


class SplitKTmaSwap(SplitKTma):
    """``splitk_tma_swap``: the same kernels on the transposed problem, C^T = B^T A^T (hopper.py,
    ``SWAP_AB``): tile_m then runs along N and tile_n along M. For shapes with few tile rows along N
    and a large K (1024_64_12288, 12288_64_8192, 4096_128_8192), whose mirror images are where
    splitk_tma wins. ``slices=1`` is the plain GEMM through the fp32 slice and the reduce kernel."""

    swap_ab = True


SLICES_HELP = ("K slices (0 = tiles x slices within half the SMs, slices >= 16 k-tiles; -1 = one wave: "
               "tiles x slices within the SMs, slices >= 8 k-tiles, hopper.one_wave_slices)")
TILE_M_HELP = "CTA tile rows (pingpong: one warpgroup per tile)"

FAMILY = SplitKTma(
    name="splitk_tma",
    # 64x64 pingpong, cluster 2x2, automatic slices: 512_64_4096 at 1.16x, 256_128_16384 at 1.08x;
    # 64x128, cluster 1x4, 8 slices: 64_1024_16384 at 1.15x (H200);
    # 128x64, cluster 1x2, 8 slices (the tile, cluster and split of cuBLAS's nvjet kernel there):
    # 128_1024_16384 at 0.92x, where the search's configs reached 0.66x
    presets=("", "tile_n=128:cluster_m=1:cluster_n=4:slices=8", "tile_m=128:cluster_m=1:cluster_n=2:slices=8"),
    knobs=(
        Knob("tile_m", (64, 128), 64, help=TILE_M_HELP),
        Knob("tile_n", (64, 128, 256), 64),
        Knob("cluster_m", (2, 1, 4), 2, help="CTAs along M sharing each B tile (TMA multicast)"),
        Knob("cluster_n", (2, 1, 4), 2, help="CTAs along N sharing each A tile (TMA multicast)"),
        Knob("schedule", ("pingpong", "cooperative"), "pingpong"),
        Knob("slices", (0, 4, 8, 16, hopper.ONE_WAVE), 0, runtime=True, help=SLICES_HELP),
    ),
)

SWAP = SplitKTmaSwap(
    name="splitk_tma_swap",
    # the mirror images of splitk_tma's presets and of its 64_2048_8192 winner (64x128, cluster
    # 1x1, 8 slices, 1.11x on the H200). Measured on the H200: 1024_64_12288 1.05x
    # (64x128; splitk_tma's best there 0.65x), 128_64_16384 1.00x (the default); tall shapes with
    # M >= 4096 lose 0.54-0.83x to the fp32 slices' traffic (hopper_swap serves those).
    # 64x128 with 4 slices (H200, 18 few-tile deep-K shapes): the best slice
    # count puts tiles x slices near one wave, 4 where 32-64 tiles, 8 where 16: 512_512_8192
    # 1.12x, 256_1024_8192 1.11x, 2048_128_8192 1.06x, 1024_256_16384 1.05x (8 slices there:
    # 0.94x, 0.94x, 0.90x, 0.92x); geomean over the 18, 0.899x against 0.865x for 8 slices
    presets=("", "tile_n=128:cluster_m=1:cluster_n=1:slices=8", "tile_n=128:cluster_m=1:cluster_n=1:slices=4"),
    knobs=(
        Knob("tile_m", (64, 128), 64, help=TILE_M_HELP + ", along N (the transposed problem's M)"),
        Knob("tile_n", (64, 128, 256, 80, 96, 160, 16, 32), 64,
             help="along M (the transposed problem's N); 80, 96, 160: cuBLAS's tiles on M = 5 or 3 x 2^k; "
                  "16, 32: decode and small-batch M (cuBLASLt's nvjet 64x16 split-K there)"),
        Knob("cluster_m", (2, 1, 4), 2),
        Knob("cluster_n", (2, 1, 4), 2),
        Knob("schedule", ("pingpong", "cooperative"), "pingpong"),
        Knob("slices", (0, 1, 4, 8, 16, hopper.ONE_WAVE, 2), 0, runtime=True, help=SLICES_HELP + "; 1 = one slice"),
    ),
)
