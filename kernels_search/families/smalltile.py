"""``smalltile``: one-launch mma.sync GEMM with tiles of 64 rows or fewer, for tiny shapes.

Same tensor-core core as ``splitk`` rendered without any split-K code: one kernel, no workspace.
Small tiles give tiny shapes more CTAs (more SMs busy) and less wasted work at ragged edges.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support
from harness.problem import Problem
from kernels_search.families import mma_sync
from kernels_search.family import DEFAULT_SMS, Family, Knob


class SmallTile(Family):
    def check(self, k: Mapping) -> str:
        return mma_sync.check_tile(k)

    def render(self, k: Mapping) -> str:
        return mma_sync.render(self.name, k, allow_split=False)

    def supports(self, k: Mapping, problem: Problem) -> Support:
        return SUPPORTED  # any M, N, K (scalar predicated loads when 16-byte loads cannot be used)

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [1, 0]  # no split


FAMILY = SmallTile(
    name="smalltile",
    # 32x32x64, 2 warps: 64_64_64 at 1.19x cuBLASLt autotune (H200)
    presets=("",),
    knobs=(
        Knob("bm", (32, 16, 64), 32, help="CTA tile rows (<= 64)"),
        Knob("bn", (32, 16, 64), 32),
        Knob("bk", (64, 32, 128), 64),
        Knob("warps_m", (1, 2, 4), 1),
        Knob("warps_n", (2, 1, 4), 2),
        Knob("kslices", (1, 2, 4), 1, help="warp groups splitting each k-tile (more warps per CTA)"),
        Knob("stages", (2, 3, 4), 2),
    ),
)
