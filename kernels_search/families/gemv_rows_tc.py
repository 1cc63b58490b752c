"""``gemv_rows_tc``: decode GEMMs with 5-16 activation rows (M <= ``m``, weights stored N x K) on the
tensor cores, each CTA streaming an equal run of whole weight rows through shared memory.

Why: a decode GEMM's time is its weight bytes, and on the H200 the access pattern sets how fast they
stream (``lab/gemv/read_floor.py``, cold, time over a plain 32 KB-run read): a warp reading 512
contiguous bytes of one row an instruction, rows dealt equally, 1.04x; the ``gemv`` family's loads
straight into mma registers (16 rows x 64 B a warp instruction) 1.12x. ``gemv_rows`` reads the first
way on the CUDA cores, which serves M <= 4; at M 8-16 the fp32 FMAs and conversions would outrun the
issue rate. templates/gemv_rows_tc.cu copies the same 512-byte runs into a cp.async ring (the
activation's chunk beside them, shared by ``r`` rows), multiplies with mma.sync m16n8k16 from
ldmatrix, and sums each output's warp parts in a fixed order.
Serves layout tn only (B as N x K, a linear layer's weight), M <= ``m``, K a multiple of 8.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import Family, Knob, cuda_source

SMEM_PER_SM = 228 * 1024  # H100/H200: 228 KB a SM, 227 KB at most a CTA, 1 KB of it reserved a CTA


def smem_bytes(k: Mapping) -> int:
    """Dynamic shared memory a CTA: the ring (weights and activation a stage) and the warps' fp32 parts."""
    return 2 * k["stages"] * (k["r"] + k["m"]) * k["kc"] + 4 * (k["threads"] // 32) * k["m"] * 16


class GemvRowsTc(Family):
    def check(self, k: Mapping) -> str:
        per_cta = min(SMEM_PER_SM // k["cps"] - 1024, 227 * 1024)
        if smem_bytes(k) > per_cta:
            return (f"{k['stages']} stages of {k['r']} + {k['m']} rows x kc={k['kc']} need {smem_bytes(k)} bytes of "
                    f"shared memory; {k['cps']} CTAs per SM leave {per_cta}")
        return ""

    def render(self, k: Mapping) -> str:
        defines = {"GT_M": k["m"], "GT_R": k["r"], "GT_KC": k["kc"], "GT_STAGES": k["stages"],
                   "GT_THREADS": k["threads"], "GT_CPS": k["cps"]}
        return cuda_source(f"hgemm-bench family {self.name}", defines, "gemv_rows_tc.cu")

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.layout != "tn":
            return unsupported("gemv_rows_tc serves layout tn only (B stored N x K)")
        if problem.m > k["m"]:
            return unsupported(f"gemv_rows_tc with m={k['m']} serves M <= {k['m']}")
        if problem.k % 8:
            return unsupported("gemv_rows_tc needs K a multiple of 8 (16-byte copies)")
        return SUPPORTED


FAMILY = GemvRowsTc(
    name="gemv_rows_tc",
    presets=("", "m=16"),
    knobs=(
        Knob("m", (8, 16), 8, help="activation rows served (M <= m): one or two n8 mma a fragment"),
        Knob("r", (32, 16, 64), 32, help="weight rows a group (the activation's chunk is shared by them)"),
        Knob("kc", (512, 256, 1024), 512, help="K elements a tile (each row's run in a stage)"),
        Knob("stages", (4, 2, 3, 6), 4, help="tiles in the cp.async ring"),
        Knob("threads", (256, 128, 512), 256, help="threads per CTA"),
        Knob("cps", (1, 2, 4), 1, help="CTAs per SM (the grid)"),
    ),
)
