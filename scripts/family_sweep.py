"""A curated sweep of kernel-family configs for `compare`, and a prebuild step for it.

CUDA family configs compile for minutes (a CUTLASS sm90 instantiation: ~1 min on one core), so
the sweep is built ahead, here or on the GPU host, into the content-addressed build cache; the
GPU run then only loads libraries. Runtime options (split count, raster order) share a binary.

    python3 scripts/family_sweep.py specs            # the --methods value
    python3 scripts/family_sweep.py prebuild [-j N]  # compile every CUDA config (cache hits are free)
    python3 scripts/family_sweep.py specs --set splitk   # the split-K sweep (few-tile, large-K shapes)
    python3 scripts/family_sweep.py specs --set parallel-splitk   # CUTLASS parallel split-K configs
    python3 scripts/family_sweep.py specs --set midsize   # mid-size shapes (wgmma-sized Triton tiles, ...)
"""

from __future__ import annotations

import argparse
import sys
import time

# Chosen per shape class of the smoke set (REFERENCES.md, "Beating cuBLAS on Hopper"):
SWEEP = [
    # few-tile, large-K: split-K with the reduction inside the call
    "splitk",  # auto split (~2 CTAs per SM), atomic fp32 reduction
    "splitk:splits=4",
    "splitk:splits=16",
    "splitk:splits=16:reduce=0",  # deterministic in-kernel ordered reduction
    "splitk:bm=32:bn=64:warps_m=1:warps_n=2",
    "splitk:bm=128:bn=128:bk=32",
    # tiny shapes: small tiles, one launch, no workspace
    "smalltile",
    "smalltile:bm=64:bn=64:warps_m=2:warps_n=2",
    # large shapes: CUTLASS sm90 TMA + WGMMA, warp-specialized, persistent
    "hopper",  # 128x256x64, cluster 2x1, cooperative
    "hopper:raster=2",
    "hopper:tile_n=128:cluster_m=1",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=pingpong",
    "hopper:tile_n=128:cluster_m=1:scheduler=streamk",
    # few-tile, large-K on the CUTLASS mainloop: parallel split-K (K slices as batches + reduce)
    "hopper:tile_m=64:tile_n=64:cluster_m=2:cluster_n=2:schedule=pingpong:scheduler=splitk:sk_splits=0",
    "hopper:tile_m=64:tile_n=64:cluster_m=2:cluster_n=2:schedule=pingpong:scheduler=splitk:sk_splits=8",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:cluster_n=4:schedule=pingpong:scheduler=splitk:sk_splits=8",
    "hopper:tile_m=64:tile_n=128:cluster_m=2:cluster_n=1:schedule=pingpong:scheduler=splitk:sk_splits=16",
    # Triton: compiled on the GPU host in ~0.3 s each
    "triton",
    "triton:block_m=64:block_n=64:split_k=4",
    "triton:block_m=64:block_n=128:block_k=64:split_k=8",
    "triton:persistent=1",
]

# Few-tile, large-K shapes (256_128_16384, 64_1024_16384): the cluster (DSMEM) reduction against
# the atomic one, and tiles that trade CTAs for L2 traffic (A is read once per tile column, B
# once per tile row). Split counts are runtime options: one binary per tile config.
SPLITK_SWEEP = [
    "splitk:splits=16",  # the best split-K config of the first sweep (atomic reduction)
    "splitk:bk=128:stages=3:splits=16",  # deeper k-tiles: more bytes in flight per CTA
    "splitk:splits=16:kslices=2",  # 8 warps per CTA: two groups split each k-tile (latency hiding)
    "splitk:splits=16:kslices=4",
    "splitk:bk=128:stages=3:splits=16:kslices=2",
    "splitk:reduce=3",  # cluster of 16 splits per 64x64 tile
    "splitk:reduce=3:spread=1",  # ... one CTA per SM
    "splitk:splits=8:reduce=3:spread=1",
    "splitk:bm=64:bn=32:warps_m=2:warps_n=1:splits=8:reduce=3:spread=1",
    "splitk:bm=128:bn=64:reduce=3:spread=1",
    "splitk:bm=128:bn=64:warps_m=4:warps_n=2:reduce=3",
    "splitk:bm=128:bn=128:warps_m=2:warps_n=4:splits=8:reduce=3",
    # more CTAs per tile (runtime split counts of binaries above)
    "splitk:splits=32:kslices=2",
    "splitk:bk=128:stages=3:splits=32:kslices=2",
    # CUTLASS sm90 (TMA + WGMMA) with the stream-K scheduler forced to split-K (sk_decomp=2), the
    # nondeterministic (atomic) fixup; clusters multicast the shared operand across the tiles
    "hopper:tile_n=128:cluster_m=1:scheduler=streamk:sk_decomp=2:sk_splits=16:sk_reduction=1",
    "hopper:tile_n=128:cluster_m=1:scheduler=streamk:sk_decomp=2:sk_splits=64:sk_reduction=1",
    "hopper:tile_n=128:cluster_m=2:scheduler=streamk:sk_decomp=2:sk_splits=32:sk_reduction=1",
    "hopper:tile_n=128:cluster_m=2:scheduler=streamk:sk_decomp=2:sk_splits=64:sk_reduction=1",
    "hopper:tile_n=64:cluster_m=2:cluster_n=2:scheduler=streamk:sk_decomp=2:sk_splits=16:sk_reduction=1",
    "hopper:tile_n=64:cluster_m=2:cluster_n=2:scheduler=streamk:sk_decomp=2:sk_splits=32:sk_reduction=1",
    "hopper:tile_n=64:cluster_m=2:cluster_n=2:scheduler=streamk:sk_decomp=2:sk_splits=32:sk_reduction=0",
]
# Parallel split-K on the CUTLASS sm90 mainloop (hopper scheduler=splitk): K slices run as the
# batches of one persistent TMA + WGMMA GEMM into fp32 slices, a PDL reduce kernel sums them.
# Clusters multicast the operand their CTAs share, which cuts the L2 bytes the mma.sync split-K
# moves (its cp.async loads also cap each SM near 45 GB/s). The mma.sync atomic config is the reference.
PARALLEL_SPLITK_SWEEP = [
    "splitk:bk=128:stages=3:splits=16",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=64:cluster_m=2:cluster_n=2:sk_splits=4",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=64:cluster_m=2:cluster_n=2:sk_splits=8",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=64:cluster_m=2:cluster_n=2:sk_splits=16",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=64:cluster_m=2:cluster_n=2:sk_splits=0",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=2:cluster_n=1:sk_splits=8",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=2:cluster_n=1:sk_splits=16",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=1:cluster_n=2:sk_splits=4",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=1:cluster_n=2:sk_splits=8",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=1:cluster_n=2:sk_splits=16",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=1:cluster_n=2:sk_splits=0",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=1:cluster_n=4:sk_splits=8",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=128:cluster_m=1:cluster_n=4:sk_splits=16",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=64:cluster_m=1:cluster_n=4:sk_splits=8",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=64:cluster_m=1:cluster_n=4:sk_splits=16",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=256:cluster_m=1:cluster_n=2:sk_splits=8",
    "hopper:schedule=pingpong:scheduler=splitk:tile_m=64:tile_n=256:cluster_m=1:cluster_n=2:sk_splits=16",
    "hopper:scheduler=splitk:tile_n=64:cluster_m=2:cluster_n=2:sk_splits=8",
    "hopper:scheduler=splitk:tile_n=64:cluster_m=2:cluster_n=2:sk_splits=16",
]
# Mid-size shapes (cuBLAS at 2.7-60 us: K <= 2048, 0.1-30 M outputs), where every family config
# an early H200 search measured was 0.60x-0.97x of cuBLASLt autotune: the search barely
# tried Triton's usual wgmma-sized tiles there (its space is ~70,000 configs), nor mma.sync tiles
# above 64 with one split, nor CUTLASS 64x64 tiles (more CTAs than 128x256 on 1-30 M outputs).
MIDSIZE_SWEEP = [
    # pointer tiles at 8 warps: at 4 (and 128 x 256, 64 x 256 at 8) they spill (triton family rule)
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=3",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=8:num_stages=4",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=8:num_stages=4",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=4",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=3:persistent=1",
    "triton:block_m=64:block_n=128:block_k=128:num_warps=8:num_stages=3",
    "splitk:bm=128:bn=128:bk=32:splits=1",
    "splitk:bm=64:bn=128:bk=64:warps_m=2:warps_n=2:stages=2:splits=1",
    "splitk:bm=128:bn=64:bk=64:warps_m=2:warps_n=2:stages=3:splits=1",
    "smalltile:bm=64:bn=64:warps_m=2:warps_n=2",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:schedule=pingpong",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=pingpong",
    "hopper:tile_n=128:cluster_m=1",
]
# CUTLASS configs that mirror the cuBLAS (nvjet) kernels `scripts/kernel_profile.py` found on the
# mid-size shapes (H200: tile, k-stages, cluster in the kernel name). A register-to-global epilogue
# was 2-5x slower on each (that knob was removed).
NVJET_SWEEP = [
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=pingpong",
    "hopper:tile_m=128:tile_n=128:cluster_m=2:schedule=pingpong:stages=6",  # nvjet 128x128_64x6_2x1
    "hopper:tile_m=64:tile_n=64:cluster_m=2:schedule=pingpong",  # nvjet 64x64_64x13_2x1
    "hopper:tile_m=256:tile_n=128:cluster_m=1:cluster_n=2:stages=4",  # nvjet 256x128_64x4_1x2 coopA
]
# CUTLASS's non-persistent kernel (one CTA per tile): is the ~1 us fixed cost the persistent loop's?
SINGLE_SWEEP = [
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=pingpong",
    "hopper:tile_m=128:tile_n=128:cluster_m=2:schedule=pingpong:stages=6",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=single",
    "hopper:tile_m=128:tile_n=128:cluster_m=1:schedule=single",
    "hopper:tile_m=128:tile_n=128:cluster_m=2:schedule=single",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:schedule=single",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=4",
    # fewer stages: 2-4 CTAs share an SM, so one CTA's epilogue overlaps another's mainloop (the
    # single kernel has no persistent loop to do that; 58 / 90 registers a thread at 64x64 / 64x128)
    "hopper:tile_m=64:tile_n=64:cluster_m=1:schedule=single:stages=3",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:schedule=single:stages=4",
    "hopper:tile_m=64:tile_n=64:cluster_m=2:schedule=single:stages=4",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=single:stages=3",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=single:stages=4",
    "hopper:tile_m=64:tile_n=128:cluster_m=2:schedule=single:stages=3",
]
# The non-persistent kernel on 4-10 us shapes: other tile shapes with two CTAs an SM, and a cluster
# along N (multicasts the A tile)
SINGLE_MID_SWEEP = [
    "hopper:tile_m=64:tile_n=128:cluster_m=1:schedule=single:stages=4",
    "hopper:tile_m=128:tile_n=128:cluster_m=2:schedule=pingpong:stages=6",
    "hopper:tile_m=128:tile_n=64:cluster_m=1:schedule=single:stages=4",
    "hopper:tile_m=128:tile_n=64:cluster_m=2:schedule=single:stages=4",
    "hopper:tile_m=64:tile_n=256:cluster_m=1:schedule=single:stages=2",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:cluster_n=2:schedule=single:stages=4",
]
# Triton's TMA kernel (tma=1: persistent, TMA loads and stores, one flattened tile x k loop) on
# the shapes cuBLAS serves at 2.2-3.3 TB/s of C written (K <= 256) and on mid-size shapes, with
# the pointer-based persistent kernel and the CUTLASS preset that led there as references
TRITON_TMA_SWEEP = [
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=3:persistent=1:tma=1",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=3:persistent=1:tma=1:epi_split=2",
    "triton:block_m=128:block_n=256:block_k=64:num_warps=8:num_stages=3:persistent=1:tma=1:epi_split=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1:epi_split=2",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1:epi_split=2",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1:per_sm=2",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=3:persistent=1",
    "hopper:tile_m=128:tile_n=128:cluster_m=2:schedule=pingpong:stages=6",
]
# Memory-bound skinny shapes (N or M of 64-128, large K: one operand streamed once, cuBLAS at
# 2.8-4.1 TB/s): deep Triton pipelines, with pointers and with TMA, tiles that give 1-2 CTAs an SM
# (pointer tiles past the triton family's register rule at 8 warps)
SKINNY_SWEEP = [
    "triton:block_m=64:block_n=64:block_k=128:num_warps=8:num_stages=4",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=6",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=8:num_stages=5",
    "triton:block_m=32:block_n=64:block_k=128:num_warps=4:num_stages=5",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=8:num_stages=5",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=4",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=8:num_stages=5:split_k=2",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=6:persistent=1:tma=1:per_sm=2",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=4:num_stages=6:persistent=1:tma=1",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=6:persistent=1:tma=1",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=4:persistent=1:tma=1:epi_split=2",
]
# N-skinny, large-K shapes (1024_64_12288 at 0.65x, 12288_64_8192, 4096_128_8192 held out at
# 0.52-0.72x): split-K on the transposed problem, whose mirror images (64_2048_8192) win.
SWAP_SWEEP = [
    "splitk_tma_swap",  # 64x64, cluster 2x2, automatic slices
    "splitk_tma_swap:slices=8",
    "splitk_tma_swap:tile_n=128:cluster_m=1:cluster_n=1:slices=8",  # the mirror of 64_2048_8192's best
    "splitk_tma_swap:tile_n=128:cluster_m=1:cluster_n=1:slices=0",
    "splitk_tma_swap:tile_n=128:cluster_m=1:cluster_n=1:slices=1",
    "splitk_tma_swap:tile_n=128:cluster_m=1:cluster_n=1:slices=16",
    "splitk_tma_swap:tile_n=128:cluster_m=1:cluster_n=2:slices=8",
    "splitk_tma_swap:tile_n=256:cluster_m=1:cluster_n=1:slices=4",
]
# Write-bound small-K shapes: more TMA tiles and two programs an SM (one's store overlaps the other's loads)
TMA_WRITE_SWEEP = [
    "triton:block_m=128:block_n=256:block_k=64:num_warps=8:num_stages=3:persistent=1:tma=1:epi_split=2",
    "triton:block_m=128:block_n=256:block_k=64:num_warps=8:num_stages=2:persistent=1:tma=1:epi_split=2",
    "triton:block_m=256:block_n=128:block_k=64:num_warps=8:num_stages=2:persistent=1:tma=1:epi_split=2",
    "triton:block_m=64:block_n=256:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:epi_split=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=64:block_n=256:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=2",
]
# The TMA kernel with 2-4 programs an SM (the tma-write sweep's winners had 2) on small-K and
# mid-size shapes of 3-60 us
TMA_MID_SWEEP = [
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=3",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:per_sm=3",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=4",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:per_sm=4",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:per_sm=3",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=64:block_n=256:block_k=64:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=128:block_n=256:block_k=64:num_warps=8:num_stages=2:persistent=1:tma=1:epi_split=2",
    "triton:block_m=128:block_n=128:block_k=128:num_warps=8:num_stages=2:persistent=1:tma=1:epi_split=2",
]
# Round two of the same on the shapes still below cuBLAS: thinner tiles for M or N of 64-128, deeper
# pipelines with 2-3 programs an SM
TMA_MID2_SWEEP = [
    "triton:block_m=64:block_n=32:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:per_sm=4",
    "triton:block_m=64:block_n=32:block_k=128:num_warps=4:num_stages=2:persistent=1:tma=1:per_sm=3",
    "triton:block_m=64:block_n=64:block_k=128:num_warps=4:num_stages=2:persistent=1:tma=1:per_sm=3",
    "triton:block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1:per_sm=3",
    "triton:block_m=64:block_n=64:block_k=64:group_m=1:num_warps=4:num_stages=2:persistent=1:tma=1:epi_split=2:per_sm=4",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:per_sm=2",
    "triton:block_m=128:block_n=64:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1:per_sm=2",
    "triton:block_m=64:block_n=128:block_k=64:num_warps=4:num_stages=4:persistent=1:tma=1:per_sm=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=3:persistent=1:tma=1:epi_split=2:per_sm=2",
    "triton:block_m=32:block_n=64:block_k=64:num_warps=4:num_stages=3:persistent=1:tma=1:per_sm=4",
]
# Tall, skinny, memory-bound shapes (M >= 2048, N <= 128, K >= 1024: 4096_128_2048 0.84x and
# 12288_128_1024 0.86x at the search's best, splitk_tma_swap 0.54-0.83x): 96 128x128 tiles leave
# SMs idle, so stream-K or a few K slices over a tile that spans N (A is read once), and the
# swapped kernel with the two N tiles in one cluster (multicast: A read once from DRAM)
TALL_SWEEP = [
    "hopper:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:schedule=cooperative:scheduler=streamk",
    "hopper:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:schedule=cooperative:scheduler=streamk:sk_decomp=2:sk_splits=2",
    "hopper:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:schedule=cooperative:scheduler=splitk:sk_splits=2",
    "hopper:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:schedule=single:stages=6",
    "splitk_tma:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:slices=0",
    "splitk_tma:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:slices=4",
    "splitk_tma:tile_n=128:cluster_m=1:cluster_n=1:slices=0",
    "splitk_tma:tile_n=128:cluster_m=1:cluster_n=1:slices=4",
    "splitk_tma_swap:tile_n=128:cluster_m=2:cluster_n=1:slices=1",
    "splitk_tma_swap:tile_n=128:cluster_m=2:cluster_n=1:slices=0",
    "splitk_tma_swap:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:slices=1",
    "splitk_tma_swap:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:slices=4",
    "triton:block_m=64:block_n=128:block_k=64:num_stages=4:split_k=2",
    "triton:block_m=128:block_n=128:block_k=64:num_warps=8:num_stages=4:split_k=2",
    "triton:block_m=64:block_n=128:block_k=64:num_stages=4",
]
# The same shapes, round two: cuBLAS's kernels there (nvjet 64x192, 6 stages, cluster 2x1 on
# 12288_128_*; 64x64, 13 stages, cluster 2x1 on 4096_128_2048, both on the transposed problem)
# mirrored by hopper_swap (no fp32 slices), and deep pipelines of small tiles on the plain kernel
TALL2_SWEEP = [
    "hopper_swap:tile_m=64:tile_n=192:cluster_m=2:cluster_n=1:schedule=pingpong:stages=6",
    "hopper_swap:tile_m=64:tile_n=192:cluster_m=1:cluster_n=1:schedule=pingpong:stages=6",
    "hopper_swap:tile_m=64:tile_n=64:cluster_m=2:cluster_n=1:schedule=single:stages=12",
    "hopper_swap:tile_m=64:tile_n=64:cluster_m=2:cluster_n=1:schedule=pingpong:stages=12",
    "hopper_swap:tile_m=64:tile_n=128:cluster_m=2:cluster_n=1:schedule=single:stages=8",
    "hopper_swap:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:schedule=single:stages=6",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:cluster_n=2:schedule=single:stages=12",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:cluster_n=1:schedule=single:stages=12",
    "hopper:tile_m=128:tile_n=128:cluster_m=1:cluster_n=1:schedule=single:stages=6",
]
# Round three: about one wave of CTAs with deep pipelines (4096_128_*: 64x64 tiles, 128 CTAs, A
# multicast along N, 12 stages: 1.02-1.05x; 12288_128_*: the transposed 64x192, 128 CTAs: 0.92-0.98x)
TALL3_SWEEP = [
    "hopper_swap:tile_m=64:tile_n=192:cluster_m=1:cluster_n=1:schedule=single:stages=6",
    "hopper_swap:tile_m=64:tile_n=192:cluster_m=2:cluster_n=1:schedule=single:stages=6",
    "hopper_swap:tile_m=64:tile_n=128:cluster_m=1:cluster_n=1:schedule=single:stages=8",
    "hopper:tile_m=128:tile_n=64:cluster_m=1:cluster_n=2:schedule=single:stages=8",
    "hopper:tile_m=64:tile_n=128:cluster_m=1:cluster_n=1:schedule=single:stages=8",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:cluster_n=2:schedule=single:stages=8",
    "hopper:tile_m=64:tile_n=64:cluster_m=1:cluster_n=2:schedule=single:stages=12",
    "hopper_swap:tile_m=64:tile_n=192:cluster_m=1:cluster_n=1:schedule=pingpong:stages=6",
]
SETS = {"all": SWEEP, "splitk": SPLITK_SWEEP, "parallel-splitk": PARALLEL_SPLITK_SWEEP, "midsize": MIDSIZE_SWEEP,
        "nvjet": NVJET_SWEEP, "single": SINGLE_SWEEP, "single-mid": SINGLE_MID_SWEEP,
        "triton-tma": TRITON_TMA_SWEEP, "skinny": SKINNY_SWEEP, "tma-write": TMA_WRITE_SWEEP,
        "tma-mid": TMA_MID_SWEEP, "tma-mid2": TMA_MID2_SWEEP, "swap": SWAP_SWEEP, "tall": TALL_SWEEP,
        "tall2": TALL2_SWEEP, "tall3": TALL3_SWEEP}


def preset_specs() -> list[str]:
    """Every family's presets: the search's initial design (its first batch on each shape)."""
    from kernels_search.families import ALL

    return [f"{name}:{p}".rstrip(":") for name, fam in ALL.items() for p in fam.presets]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["specs", "prebuild"])
    ap.add_argument("-j", type=int, default=None, help="parallel compiles (default: cores)")
    ap.add_argument("--set", default="all", choices=sorted([*SETS, "presets"]),
                    help="which sweep (default: all; presets: every family's presets, the search's design)")
    args = ap.parse_args()
    sweep = preset_specs() if args.set == "presets" else SETS[args.set]
    if args.what == "specs":
        print(",".join(sweep))
        return 0
    from harness.registry import resolve
    from kernels_search.cuda_method import CudaKernelMethod, prebuild

    methods = [m for m in resolve(sweep) if isinstance(m, CudaKernelMethod)]
    t0 = time.perf_counter()
    results = prebuild(methods, workers=args.j)
    bad = 0
    for m, r in zip(methods, results):
        state = "cached" if r.cached else f"{r.compile_s:6.1f} s"
        print(f"{m.name:60s} {'ok ' if r.ok else 'FAIL'} {state}  regs {r.resources.get('registers', '-')} "
              f"spills {r.resources.get('spill_bytes', '-')}")
        bad += not r.ok
    print(f"{len(methods)} CUDA configs in {time.perf_counter() - t0:.0f} s, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
