"""``gemv_bulk``: decode GEMMs (M <= 32, weights stored N x K) with the weights streamed by the TMA's
1-D bulk copy in long contiguous runs, an equal share for every SM.

Why: a decode GEMM's time is its weight bytes, and how fast they stream on the H200 depends on the
access pattern (``lab/gemv/read_floor.py``, cold): a plain read in long contiguous runs reaches
4.4-4.6 TB/s on 100+ MB, the ``gemv`` family's pattern (16 rows x 64 B a warp instruction) over the
same bytes 6-10 % less even with its work balanced, and it splits work by row blocks, so SMs get
unequal shares. templates/gemv_bulk.cu has one producer thread per CTA copy each weight row's next
``kc`` elements into shared memory ``stages`` ahead, the row tiles' 64-element quanta dealt to the
CTAs in equal ranges (a tile shared by two CTAs is summed in order by the last to finish), and
consumer warps run mma.sync on the staged weights with the activation from L1/L2.
Serves layout tn only (B as N x K, a linear layer's weight) with K a multiple of 64.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import DEFAULT_SMS, Family, Knob, cuda_source

SMEM_LIMIT = 227 * 1024  # an H100/H200 CTA's dynamic shared memory
QUANTUM = 64  # k elements: the unit the CTAs' shares are cut in


def smem_bytes(k: Mapping) -> int:
    """Dynamic shared memory: the stages (each row's run padded by 64 bytes) and the consumer warps'
    fp32 parts handed to warp 0."""
    stage = k["rt"] * (2 * k["kc"] + 64)
    red = max(k["warps"] - 1, 1) * k["mt"] * (k["rt"] // 8) * 32 * 16
    return k["stages"] * stage + red


def fragment_registers(k: Mapping) -> int:
    """Registers a consumer lane holds across a stage: its fp32 accumulators (4 per 16 x 8 fragment)
    and two stages' activation fragments (this stage's and the next one's, loaded a stage ahead:
    2 x 16-byte loads per 16-row fragment and 32-k group the warp takes)."""
    groups_per_warp = -(-(k["kc"] // 32) // k["warps"])
    return 4 * k["mt"] * (k["rt"] // 8) + 2 * groups_per_warp * k["mt"] * 2 * 4


class GemvBulk(Family):
    def check(self, k: Mapping) -> str:
        smem = smem_bytes(k)
        if smem > SMEM_LIMIT:
            return f"{k['stages']} stages of {k['rt']} rows x {k['kc']} k need {smem} bytes of shared memory (> {SMEM_LIMIT})"
        if 4 * k["mt"] * (k["rt"] // 8) > 32:  # measured: mt=2 with rt=64 (64 accumulators) spills
            return f"mt={k['mt']} x rt={k['rt']} needs {4 * k['mt'] * k['rt'] // 8} fp32 accumulators a lane (> 32)"
        regs = fragment_registers(k)
        if regs > 96:  # measured on sm_90a: 96 compile without spills (mt=2, kc=512), 128 and 160 spill
            return (f"mt={k['mt']}, rt={k['rt']}, kc={k['kc']}, warps={k['warps']} hold {regs} registers of accumulators "
                    f"and activation fragments a lane (> 96)")
        return ""

    def render(self, k: Mapping) -> str:
        defines = {"GB_MT": k["mt"], "GB_RT": k["rt"], "GB_KC": k["kc"], "GB_STAGES": k["stages"],
                   "GB_WARPS": k["warps"]}
        return cuda_source(f"hgemm-bench family {self.name}", defines, "gemv_bulk.cu")

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.layout != "tn":
            return unsupported("gemv_bulk serves layout tn only (B stored N x K)")
        if problem.m > 16 * k["mt"]:
            return unsupported(f"gemv_bulk with mt={k['mt']} serves M <= {16 * k['mt']}")
        if problem.k % QUANTUM:
            return unsupported(f"gemv_bulk needs K a multiple of {QUANTUM}")
        return SUPPORTED

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["ctas"])]


FAMILY = GemvBulk(
    name="gemv_bulk",
    presets=("", "mt=2"),
    knobs=(
        Knob("mt", (1, 2), 1, help="16-row activation fragments: serves M <= 16*mt"),
        Knob("rt", (32, 16, 64), 32, help="weight rows a tile (the rows a stage copies)"),
        Knob("kc", (512, 256, 1024), 512, help="k a stage copies per row: runs of 2*kc contiguous bytes"),
        Knob("stages", (5, 2, 3, 4, 6, 8), 5, help="stages in flight: stages*rt*2*kc bytes per SM"),
        Knob("warps", (8, 4), 8, help="consumer warps (one more warp issues the copies)"),
        Knob("ctas", (0,), 0, runtime=True, help="CTAs (0 = one per SM)"),
    ),
)
