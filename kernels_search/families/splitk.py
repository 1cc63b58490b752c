"""``splitk``: mma.sync tiles with split-K for few-tile, large-K shapes (e.g. 256_128_16384).

The K range is split ``splits`` ways (a runtime option, so one binary serves every split count);
each CTA accumulates its slice in fp32, and the reduction plus fp16 cast happen inside the same
``hgemm_run``: by the last CTA to finish each tile (``reduce=0``, one launch, arrival counters in
the workspace) or by a second small kernel on the same stream (``reduce=1``), or every split
adds into one fp32 tile with atomics and the last CTA casts and re-zeroes it (``reduce=2``), or
the splits of a tile run as one thread-block cluster and reduce through distributed shared
memory, each CTA summing and storing 1/splits of the tile (``reduce=3``, at most 16 splits, no
global traffic for the reduction). Modes 0 and 2 need the workspace zero-filled once when
allocated; every call leaves it so.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support
from harness.problem import Problem
from kernels_search.families import mma_sync
from kernels_search.family import DEFAULT_SMS, Family, Knob


class SplitK(Family):
    def check(self, k: Mapping) -> str:
        if k["spread"] and k["reduce"] != 3:
            return "spread=1 only applies to reduce=3 (cluster reduction)"
        return mma_sync.check_tile(k)

    def render(self, k: Mapping) -> str:
        return mma_sync.render(self.name, k, allow_split=True)

    def supports(self, k: Mapping, problem: Problem) -> Support:
        return SUPPORTED  # any M, N, K: 16-byte loads when aligned, scalar predicated loads otherwise

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["splits"]), int(k["reduce"]), int(k["spread"])]


FAMILY = SplitK(
    name="splitk",
    # 32x64 tiles, 5 stages, automatic splits: 64_256_2048 at 1.06x (H200)
    presets=("bm=32:bn=64:stages=5",),
    knobs=(
        Knob("bm", (64, 32, 128), 64, help="CTA tile rows"),
        Knob("bn", (64, 32, 128), 64, help="CTA tile columns"),
        Knob("bk", (64, 32, 128), 64, help="k-tile depth per pipeline stage"),
        Knob("warps_m", (2, 1, 4), 2),
        Knob("warps_n", (2, 1, 4), 2),
        Knob("kslices", (1, 2, 4), 1,
             help="warp groups splitting each k-tile's 16-deep steps (more warps per CTA to hide "
                  "load latency; group 0 sums the others' tiles through shared memory)"),
        Knob("stages", (4, 2, 3, 5, 6), 4, help="cp.async pipeline depth"),
        Knob("splits", (0, 1, 2, 4, 8, 12, 16, 24, 32, 48, 64), 0, runtime=True,
             help="K split count; 0 = enough CTAs for one wave"),
        Knob("reduce", (2, 0, 1, 3), 2, runtime=True,
             help="0: slices, last CTA per tile sums them (one launch); 1: slices, second reduce "
                  "kernel; 2: fp32 atomics into one tile, last CTA casts (one launch); 3: the splits "
                  "of a tile are one thread-block cluster (<= 16 splits) reducing through distributed "
                  "shared memory (one launch, no workspace)"),
        Knob("spread", (0, 1), 0, runtime=True,
             help="reduce=3: 1 = pad shared memory so one CTA fits per SM (the cluster scheduler "
                  "cannot stack a cluster's CTAs on few SMs); ignored by the other modes"),
    ),
)
