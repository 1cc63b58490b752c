"""``skinny``: a wide operand streamed by every SM against a narrow one, K split in one launch.

For the shapes where cuBLAS is furthest from the memory floor: decode GEMMs (M <= 32, the weight
matrix read once by all SMs), few-tile deep-K GEMMs and tiny ones. templates/skinny_gemm.cu:
mma.sync m16n8k16 fed by a deep pipeline (the wide operand through the TMA engine); the larger of M
and N runs along the tensor
cores' 16-row side (with M <= N the kernel computes C^T = B^T A^T, so a 1-32 row activation is an
8-column operand), one wave of CTAs takes equal runs of the (tile, k-tile) units (stream-K), so
every SM streams the same bytes whatever the tile count, and the last CTA to finish a tile sums
the fp32 parts in CTA order (deterministic) and stores C. No second kernel, no atomics on data,
no memset. ``sched=0`` is plain split-K (a CTA per tile and k slice) with the same reduction.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search.family import DEFAULT_SMS, Family, Knob, SMEM_LIMIT, cuda_source



def _pad(halves: int) -> int:
    """Row padding of templates/skinny_gemm.cu's pad_for: none for an odd number of 16-byte units."""
    return 8 if (halves // 8) % 2 == 0 else 0


def smem_bytes(k: Mapping) -> int:
    """Shared memory of the largest of the four kernels (orientation x B layout) of a config."""
    wt, nt, bk = k["wt"], k["nt"], k["bk"]
    wide = wt * bk if k["tma"] else max(wt * (bk + _pad(bk)), bk * (wt + _pad(wt)))
    narrow = max(nt * (bk + _pad(bk)), bk * (nt + _pad(nt)))
    pipe = k["stages"] * (wide + narrow) * 2
    out = max(nt * (wt + _pad(wt)), wt * (nt + _pad(nt))) * 2  # the output staging area, apart
    return pipe + out + (1024 if k["tma"] else 0)  # TMA boxes: 1024-byte alignment slack


class Skinny(Family):
    def check(self, k: Mapping) -> str:
        wt, nt, ww, wn = k["wt"], k["nt"], k["warps_w"], k["warps_n"]
        if wt % (16 * ww):
            return f"wt={wt} must be a multiple of 16*warps_w={16 * ww}"
        if nt % (8 * wn):
            return f"nt={nt} must be a multiple of 8*warps_n={8 * wn}"
        ni = nt // wn // 8
        if ni > 1 and ni % 2:
            return f"a warp's {ni} narrow fragments must be one or an even number"
        threads = ww * wn * 32
        if threads > 1024:
            return f"{threads} threads per CTA (> 1024)"
        acc = (wt // ww) * (nt // wn) // 32
        if acc > 128:
            return f"warp tile {wt // ww}x{nt // wn} needs {acc} accumulator registers per thread (> 128)"
        if k["minb"] * threads > 2048:
            return f"minb={k['minb']} CTAs of {threads} threads exceed an SM's 2048 threads"
        smem = smem_bytes(k)
        if smem > SMEM_LIMIT:
            return f"{smem} bytes of shared memory > {SMEM_LIMIT}"
        if k["minb"] * (smem + 1024) > 228 * 1024:
            return f"minb={k['minb']} CTAs of {smem} bytes of shared memory exceed an SM's 228 KB"
        return ""

    def render(self, k: Mapping) -> str:
        defines = {
            "SK_WT": k["wt"], "SK_NT": k["nt"], "SK_BK": k["bk"],
            "SK_WARPS_W": k["warps_w"], "SK_WARPS_N": k["warps_n"],
            "SK_STAGES": k["stages"], "SK_MINB": k["minb"], "SK_TMA": k["tma"],
        }
        return cuda_source(f"hgemm-bench family {self.name}", defines, "skinny_gemm.cu")

    def supports(self, k: Mapping, problem: Problem) -> Support:
        if problem.k % 8:
            return unsupported("skinny needs K a multiple of 8 (16-byte rows of A)")
        if problem.layout == "nn" and problem.n % 8:
            return unsupported("skinny needs N a multiple of 8 for layout nn (16-byte rows of B)")
        return SUPPORTED

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["splits"]), int(k["orient"]), int(k["sched"]), int(k["per_sm"])]


FAMILY = Skinny(
    name="skinny",
    # measured best per decode row count on the H200 (lab/skinny/NOTES.md): M <= 8, 9-16, 17-32;
    # then two few-tile tiles
    presets=(
        "wt=64:bk=256:warps_w=4",
        "nt=16",
        "nt=32",
        "wt=64:nt=64:warps_w=2:warps_n=2:stages=4",
        "wt=128:nt=128:warps_w=4:warps_n=2:bk=64:stages=4",
    ),
    knobs=(
        Knob("wt", (128, 64, 256), 128, help="CTA tile along the wide dimension (max(M, N) unless orient says)"),
        Knob("nt", (8, 16, 32, 64, 128), 8, help="CTA tile along the narrow dimension"),
        Knob("bk", (128, 64, 256), 128, help="k-tile depth per pipeline stage"),
        Knob("warps_w", (8, 4, 2, 1), 8, help="warps along the wide dimension"),
        Knob("warps_n", (1, 2, 4), 1, help="warps along the narrow dimension"),
        Knob("stages", (4, 3, 5, 6, 8), 4, help="cp.async pipeline depth"),
        Knob("minb", (1, 2), 1, help="CTAs per SM the register budget must allow"),
        Knob("tma", (1, 0), 1, help="1 = the wide operand through the TMA engine (2D boxes, swizzled); "
                                    "0 = 16-byte cp.async per thread"),
        Knob("sched", (1, 0), 1, runtime=True,
             help="1 = stream-K: one wave of CTAs, each an equal run of (tile, k-tile) units; "
                  "0 = split-K: a CTA per (tile, k slice)"),
        Knob("splits", (0, 1, 2, 4, 8, 16, 32, 64), 0, runtime=True,
             help="sched=0: K split count; 0 = the fewest that give every SM an equal share"),
        Knob("per_sm", (0, 1, 2), 0, runtime=True, help="sched=1: CTAs per SM (0 = as many as fit)"),
        Knob("orient", (0, 1, 2), 0, runtime=True,
             help="0 = C^T = B^T A^T when M <= N, else C = A B; 1 = always C = A B; 2 = always C^T"),
    ),
)
