"""``splitk_regs``: split-K for few-tile shapes (few output tiles, deep K), both operands streamed straight
into mma.sync registers, the K slices of a tile summed inside one launch through distributed shared memory.

Why: on few-tile shapes cuBLAS and the split-K families take 4-6 us where the floor is about 1 us, every
unit nearly idle. Nsight Compute on the mma.sync split-K family (lab/fewtile/ncu-cluster-h200.md) showed
each warp's long chain of dependent cp.async, ldmatrix and MMA instructions setting the time (issue on a
quarter of the active cycles, 0.2-0.3 warps eligible), not memory. templates/splitk_regs.cu gives every warp
little to do: 16-byte loads of A and B rows straight into fragment registers (the gemv family's k
permutation), all of a run in flight before its MMAs, FM x FN independent accumulators, the CTA's warps
summed through shared memory and the cluster's slices through distributed shared memory, one launch, no
workspace. Serves layout tn only (A and B both K-contiguous), K a multiple of 8.
Measured on the H200 (lab/fewtile/regs-h200.md) it leads the packaged library only where the operands are a
few MB (128_64_4096: 1.43x the best baseline, the library 1.26x): its tiles are small (a tile is one warp's
registers), so each operand is read N / TN or M / TM times, and on larger few-tile shapes that fetch loses.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import DEFAULT_SMS, SMEM_LIMIT, Family, Knob, cuda_source


def registers(k: Mapping) -> int:
    """Registers a thread holds at least: the accumulators and one run's loads (ptxas adds addressing)."""
    return 4 * k["fm"] * k["fn"] + 4 * k["u"] * (2 * k["fm"] + k["fn"])


def smem_bytes(k: Mapping) -> int:
    """Dynamic shared memory: half the warps' fp32 parts (summed by halving), reused for the CTA's summed tile."""
    return max(max(k["warps"] // 2, 1) * k["fm"] * k["fn"] * 32 * 16, 16 * k["fm"] * (8 * k["fn"] + 4) * 4)


class SplitKRegs(Family):
    def check(self, k: Mapping) -> str:
        regs = registers(k)
        # 40 for pointers and indices; the launch bound is one CTA a SM, so a thread may use 65536 / threads
        cap = min(255, 65536 // (32 * k["warps"]))
        if regs + 40 > cap:
            return (f"fm={k['fm']} x fn={k['fn']} accumulators and u={k['u']} runs of loads need about {regs + 40} "
                    f"registers a thread (> {cap} at {k['warps']} warps)")
        if smem_bytes(k) > SMEM_LIMIT:
            return f"{smem_bytes(k)} bytes of shared memory > {SMEM_LIMIT}"
        return ""

    def render(self, k: Mapping) -> str:
        defines = {"SR_FM": k["fm"], "SR_FN": k["fn"], "SR_WARPS": k["warps"], "SR_U": k["u"]}
        return cuda_source(f"hgemm-bench family {self.name}", defines, "splitk_regs.cu", parts=("cluster_slices.cuh",))

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.layout != "tn":
            return unsupported("splitk_regs serves layout tn only (A and B both K-contiguous)")
        if problem.k % 8:
            return unsupported("splitk_regs needs K a multiple of 8 (16-byte rows)")
        if -(-problem.m // (16 * k["fm"])) > 65535:
            return unsupported("more than 65535 tiles along M")
        return SUPPORTED

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["splits"])]


FAMILY = SplitKRegs(
    name="splitk_regs",
    # measured on the H200 (run aec84b54f4a4, lab/fewtile/regs-h200.md), 32x32 tiles with automatic slices:
    # 128_64_4096 at 1.43x the best baseline (u=2; the packaged library 1.26x), 128_64_1024 1.07x, 64_256_1024 1.04x
    presets=("", "u=2"),
    knobs=(
        Knob("fm", (2, 1, 4), 2, help="16-row A fragments a tile: tile rows 16*fm"),
        Knob("fn", (4, 2, 8), 4, help="8-column B fragments a tile: tile columns 8*fn"),
        Knob("warps", (8, 4, 16), 8, help="warps per CTA, splitting the slice's 32-k chunks"),
        Knob("u", (1, 2), 1, help="32-k chunks a warp loads before its MMAs"),
        Knob("splits", (0, 1, 2, 4, 8, 16), 0, runtime=True,
             help="K slices, the CTAs of one cluster (0 = about one CTA a SM, at most 8, "
                  "no more than fit at once; at most 16)"),
    ),
)
