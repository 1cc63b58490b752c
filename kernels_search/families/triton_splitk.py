"""``triton_splitk``: a Triton split-K GEMM whose partial sums are reduced inside the same launch.

For shapes with fewer output tiles than SMs, where one program per tile leaves most SMs idle and
each SM fetches a whole tile's A and B panels alone. Program (tile, s) multiplies its share of K
into an fp32 partial and adds it into the tile's one fp32 accumulator in a workspace (atomic adds);
a per-tile counter tells the last program of the tile to read the accumulator, write C and leave
accumulator and counter at zero for the next call. One launch per call (the ``triton`` family's
split-K takes three: zero-fill, atomics, cast), no program ever waits for another, so any grid size
is safe, and the last program reads one tile however many slices there are: a one-tile shape can
spread its K over every SM (a form with a slot per slice, summed by the last program, capped the
slices by that read and lost on an H100: lab/fewtile/triton-splitk-check-h100.txt).

``split_k=0`` (the default) sizes the split to the device: as many slices as fill one wave of
programs, each with at least ``MIN_K_TILES`` k-tiles; where the tiles fill at most half a wave and K
is deep, more, up to ``RESIDENT`` programs a SM, while each slice keeps ``DEEP_K_TILES`` k-tiles
(``auto_split``). The workspace (tiles x tile
fp32) and the counters are allocated zeroed once per prepared call, and every call leaves them at
zero. The sum's order follows the slices' arrival, so results vary in the last fp32 bits from call
to call. ``tma=1`` loads A and B through TMA descriptors (one instruction a tile, no addresses or masks
held a thread, so 64 x 128 fits 4 warps); it needs 16-byte row strides (K, and N for "nn", multiples of 8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from harness.method import Support, unsupported
from harness.problem import Problem
from kernels_search.families.triton_gemm import triton_available
from kernels_search.family import Family, Knob, SMEM_LIMIT

KERNEL_FILE = Path(__file__).resolve().parent.parent / "triton_splitk_kernel.py"
MIN_K_TILES = 2  # k-tiles a slice gets at least under split_k=0 (a shorter loop cannot pipeline)
# k-tiles below which split_k=0 does not split: the in-launch reduction costs about 1 us (the adds,
# the counter, the last program's read), the time of 6-8 k-tiles of the loop it shortens; measured on
# an H100 (runs 8e08c6569a6d, 2ef326512b00): split in 2-4 at K 256-512 0.72-0.80x of the best baseline where the
# same tile unsplit is at 1.06x; at K 1024 split 8 at 0.99-1.03x, at K >= 4096 1.09-1.44x
SPLIT_MIN_K_TILES = 16
# Past one wave on deep K: one program a SM streams a 128-k-tile slice alone while up to four fit (48 KB
# of shared memory each at 64 x 64). On the 25 deepk-60 shapes of at most 16 tiles (H100, run e0f4824c2a07,
# lab/fewtile/split-depth-h100.md) the one-wave split was within 2 % of the best slice count except at
# K 16384, where 8 or 16 slices of 16-32 k-tiles were 1.2-1.8x faster.
DEEP_K_TILES = 16
RESIDENT = 4


def auto_split(tiles: int, k_tiles: int, sms: int) -> int:
    """Slices per tile for ``split_k=0``: as many as keep tiles x slices within one wave of ``sms``
    programs and give each slice ``MIN_K_TILES`` k-tiles or more; where that splits and K is deep, more
    if that keeps tiles x slices within ``RESIDENT`` programs a SM and each slice ``DEEP_K_TILES``
    k-tiles (a power of two up to 32); rounded so that no slice is empty (1 when the tiles alone fill
    half a wave or more, or K is under ``SPLIT_MIN_K_TILES`` k-tiles)."""
    if k_tiles < SPLIT_MIN_K_TILES:
        return 1
    split = max(1, min(sms // max(tiles, 1), k_tiles // MIN_K_TILES))
    if split >= 2:  # only where the tiles fill at most half a wave: the shapes the rule was measured on
        cap = min(RESIDENT * sms // max(tiles, 1), k_tiles // DEEP_K_TILES, 32)
        deep = 1
        while deep * 2 <= cap:
            deep *= 2
        split = max(split, deep)
    per = -(-k_tiles // split)
    return -(-k_tiles // per)


class TritonSplitK(Family):
    kernel_file = KERNEL_FILE  # the one module the kernel lives in (its text is the family's source)

    def check(self, k: Mapping) -> str:
        smem = k["num_stages"] * (k["block_m"] + k["block_n"]) * k["block_k"] * 2
        if smem > SMEM_LIMIT:
            return f"{k['num_stages']} stages need {smem} bytes of shared memory > {SMEM_LIMIT}"
        threads = k["num_warps"] * 32
        loads = (k["block_m"] + k["block_n"]) * k["block_k"] // threads
        if loads > 64 and not k.get("tma"):  # each loaded element's 64-bit address is a register pair: 96 spilled 64 x 128 at 4 warps
            return f"{loads} A and B elements a thread a k-tile (> 64): more warps or a smaller tile"
        acc = k["block_m"] * k["block_n"] // threads
        if acc > 128:
            return f"{acc} fp32 accumulators per thread (> 128, the partial sum doubles them): more warps or a smaller tile"
        return ""

    def render(self, k: Mapping) -> str:
        """The kernel module's text (knobs are constexpr launch arguments, not source edits)."""
        return self.kernel_file.read_text()

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if k.get("tma") and (problem.k % 8 or (problem.layout == "nn" and problem.n % 8)):
            return unsupported(f"tma=1 needs 16-byte TMA row strides: K (and N for nn) multiples of 8, "
                               f"not K={problem.k}, N={problem.n}")
        return triton_available()


FAMILY = TritonSplitK(
    name="triton_splitk",
    backend="triton",
    # the two tiles that won on an H100 (runs 8e08c6569a6d, 2ef326512b00): 64 x 64 on 15 class shapes
    # (256_64_8192 1.11x, 64_256_8192 1.13x), 16 x 64 on 12 (128_64_4096 1.44x)
    presets=("block_m=64:block_n=64:block_k=64:num_warps=4:num_stages=3",
             "block_m=16:block_n=64:block_k=64:num_warps=4:num_stages=4"),
    knobs=(
        Knob("block_m", (32, 16, 64, 128), 32),
        Knob("block_n", (64, 16, 32, 128), 64),
        Knob("block_k", (64, 16, 32, 128), 64),
        Knob("split_k", (0, 1, 2, 4, 8, 16, 32, 64), 0,
             help="slices of K per tile; 0: sized to this device (auto_split); 1: no split"),
        Knob("num_warps", (4, 2, 8), 4),
        Knob("num_stages", (3, 2, 4, 5), 3),
        Knob("tma", (0, 1), 0, help="1: A and B through TMA descriptors (no addresses or masks held a thread)"),
    ),
)
