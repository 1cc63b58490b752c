"""``triton_splitk``: a Triton split-K GEMM whose partial sums are reduced inside the same launch.

For shapes with fewer output tiles than SMs, where one program per tile leaves most SMs idle and
each program's k loop is a chain of load latencies. Program (tile, s) multiplies its share of K
into an fp32 partial in a workspace slot of its own; a per-tile counter tells the last program of
the tile to sum the tile's partials in slice order (fp32, deterministic), write C and reset the
counter. One launch per call (the ``triton`` family's split-K takes three: zero-fill, atomics,
cast), no program ever waits for another, so any grid size is safe.

``split_k=0`` (the default) sizes the split to the device: as many slices as fill one wave of
programs, each with at least two k-tiles, the last program's read at most 64 KB (``auto_split``). The workspace (tiles x slices x tile
fp32) and the counters are allocated once per prepared call; the counters start at zero and
every call leaves them at zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from harness.method import Support
from harness.problem import Problem
from kernels_search.families.triton_gemm import triton_available
from kernels_search.family import Family, Knob, SMEM_LIMIT

KERNEL_FILE = Path(__file__).resolve().parent.parent / "triton_splitk_kernel.py"
MIN_K_TILES = 2  # k-tiles a slice gets at least under split_k=0 (a shorter loop cannot pipeline)
# fp32 partial bytes the last program of a tile reads at most under split_k=0: one SM sums them
# alone, at a few hundred GB/s out of L2, so 64 KB is about the time of a short k loop
FIXUP_BYTES = 64 * 1024
# elements (slots x outputs) a thread of the fix-up loads at once: its registers hold each element's
# value and 64-bit address, beside the accumulator (32 spilled 64 x 128 tiles at 4 warps)
REDUCE_PER_THREAD = 16


def auto_split(tiles: int, k_tiles: int, sms: int, tile_elems: int = 0) -> int:
    """Slices per tile for ``split_k=0``: the largest power of two that keeps tiles x slices within
    one wave of ``sms`` programs, gives each slice ``MIN_K_TILES`` k-tiles or more and keeps the fix-up's
    read (slices x ``tile_elems`` fp32) within ``FIXUP_BYTES`` (1 when the tiles alone fill the
    device or K is short)."""
    split = 1
    while (tiles * split * 2 <= sms and (split * 2) * MIN_K_TILES <= k_tiles
           and split * 2 * tile_elems * 4 <= FIXUP_BYTES):
        split *= 2
    return split


def reduce_chunk(split: int, tile_elems: int, num_warps: int = 4) -> int:
    """Outputs the fix-up sums per step: all ``split`` slots of them loaded at once,
    ``REDUCE_PER_THREAD`` elements a thread (a power of two, at most the tile)."""
    return max(1, min(tile_elems, REDUCE_PER_THREAD * 32 * num_warps // split))


class TritonSplitK(Family):
    def check(self, k: Mapping) -> str:
        smem = k["num_stages"] * (k["block_m"] + k["block_n"]) * k["block_k"] * 2
        if smem > SMEM_LIMIT:
            return f"{k['num_stages']} stages need {smem} bytes of shared memory > {SMEM_LIMIT}"
        threads = k["num_warps"] * 32
        loads = (k["block_m"] + k["block_n"]) * k["block_k"] // threads
        if loads > 64:  # each loaded element's 64-bit address is a register pair: 96 spilled 64 x 128 at 4 warps
            return f"{loads} A and B elements a thread a k-tile (> 64): more warps or a smaller tile"
        acc = k["block_m"] * k["block_n"] // threads
        if acc > 128:
            return f"{acc} fp32 accumulators per thread (> 128, the partial sum doubles them): more warps or a smaller tile"
        return ""

    def render(self, k: Mapping) -> str:
        """The kernel module's text (knobs are constexpr launch arguments, not source edits)."""
        return KERNEL_FILE.read_text()

    def supports(self, k: Mapping, problem: Problem) -> Support:
        return triton_available()


FAMILY = TritonSplitK(
    name="triton_splitk",
    backend="triton",
    presets=("block_m=32:block_n=64:block_k=64:num_warps=4:num_stages=3",),
    knobs=(
        Knob("block_m", (32, 16, 64, 128), 32),
        Knob("block_n", (64, 16, 32, 128), 64),
        Knob("block_k", (64, 16, 32, 128), 64),
        Knob("split_k", (0, 2, 4, 8, 16, 32, 64), 0,
             help="slices of K per tile; 0: one wave of programs on this device (auto_split)"),
        Knob("num_warps", (4, 2, 8), 4),
        Knob("num_stages", (3, 2, 4, 5), 3),
    ),
)
