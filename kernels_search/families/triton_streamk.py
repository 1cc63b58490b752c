"""``triton_streamk``: a Triton stream-K GEMM, every program given the same number of k-tiles.

``triton_splitk`` splits every tile into equal slices, so a tile count that does not divide the SM
count leaves SMs idle or runs a second, mostly empty wave: 72 tiles on 132 SMs run 72 programs
(split 1, 55 % of the SMs), 144 tiles run two waves of which the second holds 12 tiles. Decode and
model-projection shapes hit this (9 of the 20 decode shapes and 4 of tune's 20 shapes use under 80 %
of the SMs at 64-column tiles). Stream-K lays the tiles' k-tiles end to end and cuts them into one
equal run per program (``partition``); a run may end inside a tile, and the tile's parts are summed in
the same launch as ``triton_splitk`` sums its slices (fp32 atomic adds into a per-tile accumulator,
a counter, the last contributor writes C). Where K has fewer than ``SPLIT_MIN_K_TILES`` k-tiles a run
holds whole tiles only (no tile is cut: the in-launch sum costs about 1 us, more than such a tile's
loop), so the programs still get equal numbers of tiles. Where there are at least as many tiles as
programs, whole waves of tiles go whole first and only the tiles left are cut (``partition`` says why).

Measured on an H100 (BENCHMARKS.md, few-tile section): 1.3-1.4x over ``triton_splitk`` where split-K
idles SMs (4096_128_16384, 2048_128_16384), 0.90x of it over the 73 few-tile class shapes; below the
best cuBLAS-family baseline on those shapes. ``tune`` measures it per shape.

The workspace (tiles x tile fp32) and the counters are allocated zeroed once per prepared call; every
call leaves them at zero.
"""

from __future__ import annotations

from pathlib import Path

from kernels_search.families.triton_splitk import FAMILY as SPLITK
from kernels_search.families.triton_splitk import MIN_K_TILES, SPLIT_MIN_K_TILES, TritonSplitK
from kernels_search.family import Knob

KERNEL_FILE = Path(__file__).resolve().parent.parent / "triton_streamk_kernel.py"


def partition(tiles: int, k_tiles: int, sms: int, per_sm: int = 1) -> tuple[int, int, int, int]:
    """(programs, k-tiles a run, the most runs any cut tile is summed from, whole tiles first) for
    ``tiles`` output tiles of ``k_tiles`` k-tiles each, at most ``sms * per_sm`` programs.

    Where there are at least as many tiles as programs, the first whole waves of tiles go whole, tile
    ``t`` to program ``t % programs`` (the "data-parallel" part): the programs of a wave start at k 0
    together, so a k-panel of A or B is read from DRAM once for the tiles that share it. Runs over all
    tiles' k-tiles at once put concurrent programs at every k, and on 1024_2048_12288 (512 tiles of
    64 x 64) read 1.2 GB from DRAM against split-K's 77 MB (Nsight Compute, H100,
    lab/fewtile/ncu-streamk-h100.md). A last wave at least half full goes whole as well. The tiles left
    (fewer than half the programs, or all tiles where they are fewer than the programs) are cut into one equal
    run per program, each ``MIN_K_TILES`` k-tiles or more, runs of whole tiles where K is shallow (see
    the module docstring). A tile held by one run is written directly (1 part)."""
    cap = sms * per_sm
    dp_tiles = (tiles // cap) * cap
    if dp_tiles and 2 * (tiles - dp_tiles) >= cap:
        dp_tiles = tiles  # a last wave at least half full goes whole too: runs would spread it over k
    rest = tiles - dp_tiles
    if rest == 0:  # whole tiles only: no run (a run length of one tile keeps the arithmetic defined)
        return cap, k_tiles, 1, dp_tiles
    iters = rest * k_tiles
    programs = max(1, min(cap, iters // MIN_K_TILES))
    per = -(-iters // programs)
    if k_tiles < SPLIT_MIN_K_TILES:
        per = -(-per // k_tiles) * k_tiles
    programs = -(-iters // per)
    parts = max((((t + 1) * k_tiles - 1) // per) - (t * k_tiles) // per + 1 for t in range(rest))
    return (cap if dp_tiles else programs), per, parts, dp_tiles


class TritonStreamK(TritonSplitK):
    """Same tiles and resource rules as ``triton_splitk``; its own kernel (``kernel_file``) and launch
    plan (``triton_method.streamk_plan``)."""

    kernel_file = KERNEL_FILE


FAMILY = TritonStreamK(
    name="triton_streamk",
    backend="triton",
    presets=SPLITK.presets,  # triton_splitk's two tiles: 64 x 64, and 16 x 64 for decode and M <= 16
    # triton_splitk's tile knobs; the run length follows from the programs, so no split knob (nor tma: this
    # kernel loads by pointer only)
    knobs=tuple(k for k in SPLITK.knobs if k.name not in ("split_k", "tma"))
    # 2 by default: on 44 shape-tiles (H100, run 67872ae7bb93) two programs a SM beat one on 38. 4 is slower
    # than 2 on most shapes (0.92x over 93, run 7fd2754108ad: with 528 programs the many-tile shapes get no
    # whole wave and their runs spread over k) and the fastest of the two and split-K on 16 of them (1.06x)
    + (Knob("per_sm", (2, 1, 4), 2, help="programs per SM (2: a second program's loads cover the first's waits)"),),
)
