"""``gemv_rows``: decode GEMMs with a few activation rows (M <= 4, weights stored N x K) on the CUDA
cores, each CTA reading an equal run of whole weight rows in long contiguous runs.

Why: a decode GEMM's time is its weight bytes, and on the H200 the access pattern sets how fast they
stream (``lab/gemv/read_floor.py``, cold, time over a plain 32 KB-run read): a warp per row reading
512 contiguous bytes an instruction 1.04x, the ``gemv`` family's mma pattern (16 rows x 64 B a warp
instruction) 1.12x, ``gemv`` itself 1.18x; with one activation row the tensor cores buy nothing.
templates/gemv_rows.cu splits the rows equally over ``cps`` CTAs per SM (no row shared, no fix-up),
reads ``r`` rows at a time with every thread's 16-byte vectors of a row contiguous across the CTA,
and sums each row's fp32 parts in a fixed order.
Serves layout tn only (B as N x K, a linear layer's weight), M <= ``m``, K a multiple of 8. Measured on the
H200 it leads ``gemv`` at M 1-2; from M = 4 the per-row fp32 work (conversions and FMAs a weight element
times M) outruns the loads and ``gemv``'s tensor cores lead, so the pool holds m=1 and m=2 configs.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import Family, Knob, cuda_source


def load_registers(k: Mapping) -> int:
    """Registers a thread holds across a vector step: the weight vectors in flight (``u`` x ``r`` loads
    of 16 bytes), the fp32 accumulators (``r`` x ``m``) and the activation vectors beyond the first."""
    return 4 * k["u"] * k["r"] + k["r"] * k["m"] + 4 * (k["m"] - 1)


class GemvRows(Family):
    def check(self, k: Mapping) -> str:
        cap = 65536 // (k["threads"] * k["cps"])
        # 28 for pointers and indices: measured on sm_90a, 64 registers held the default (61 used) and
        # spilled r=8 with u=1 and m=4 with u=1
        if load_registers(k) + 28 > min(cap, 255):
            return (f"u={k['u']} x r={k['r']} loads in flight, {k['r'] * k['m']} accumulators and "
                    f"m={k['m']} activation "
                    f"vectors do not fit the {min(cap, 255)} registers a thread has at {k['cps']} CTAs of "
                    f"{k['threads']} threads per SM")
        return ""

    def render(self, k: Mapping) -> str:
        defines = {"GR_M": k["m"], "GR_R": k["r"], "GR_THREADS": k["threads"], "GR_CPS": k["cps"], "GR_U": k["u"]}
        return cuda_source(f"hgemm-bench family {self.name}", defines, "gemv_rows.cu")

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.layout != "tn":
            return unsupported("gemv_rows serves layout tn only (B stored N x K)")
        if problem.m > k["m"]:
            return unsupported(f"gemv_rows with m={k['m']} serves M <= {k['m']}")
        if problem.k % 8:
            return unsupported("gemv_rows needs K a multiple of 8 (16-byte rows)")
        return SUPPORTED


FAMILY = GemvRows(
    name="gemv_rows",
    presets=("", "m=2,threads=128,cps=8,u=1"),
    knobs=(
        Knob("m", (1, 2, 4), 1, help="activation rows served (M <= m)"),
        Knob("r", (4, 2, 8), 4, help="weight rows a CTA reads at once"),
        Knob("threads", (256, 128, 512), 256, help="threads per CTA"),
        Knob("cps", (4, 2, 8), 4, help="CTAs per SM (the grid)"),
        Knob("u", (2, 1, 4), 2, help="vector steps unrolled: u x r loads of 16 bytes in flight per thread"),
    ),
)
