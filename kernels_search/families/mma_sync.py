"""Shared knob rules of the two mma.sync families (``splitk`` and ``smalltile``).

Both render ``templates/mma_sync_gemm.cu``: m16n8k16 tensor-core tiles fed by a cp.async
shared-memory pipeline, with a scalar predicated load path for shapes the 16-byte path cannot
take (K, or N for "nn", not a multiple of 8). Any M, N, K >= 1 is served.
"""

from __future__ import annotations

from typing import Mapping

from kernels_search.family import SMEM_LIMIT, cuda_source

PAD = 8


def smem_bytes(k: Mapping) -> int:
    a = k["bm"] * (k["bk"] + PAD)
    b = max(k["bk"] * (k["bn"] + PAD), k["bn"] * (k["bk"] + PAD))
    slices = (k.get("kslices", 1) - 1) * k["bm"] * k["bn"] * 4  # k-slice groups' parked fp32 tiles
    return max(k["stages"] * (a + b) * 2, slices)


def check_tile(k: Mapping) -> str:
    """'' if the tile/warp/stage combination is buildable, else why not."""
    bm, bn, bk, wm, wn = k["bm"], k["bn"], k["bk"], k["warps_m"], k["warps_n"]
    if bm % (16 * wm):
        return f"bm={bm} must be a multiple of 16*warps_m={16 * wm}"
    if bn % (16 * wn):
        return f"bn={bn} must be a multiple of 16*warps_n={16 * wn}"
    ks = k.get("kslices", 1)
    if (bk // 16) % ks:
        return f"bk={bk} has {bk // 16} 16-deep steps: not divisible among kslices={ks} warp groups"
    nt = wm * wn * 32 * ks
    if (bm * bk // 8) % nt or (bn * bk // 8) % nt:
        return f"{bm}x{bk} and {bn}x{bk} tiles must split into 16-byte chunks evenly over {nt} threads"
    if nt > 1024:
        return f"{nt} threads per CTA (> 1024)"
    acc_regs = (bm // wm) * (bn // wn) // 32  # fp32 accumulators per thread
    if acc_regs > 128:
        return f"warp tile {bm // wm}x{bn // wn} needs {acc_regs} accumulator registers per thread (> 128)"
    if smem_bytes(k) > SMEM_LIMIT:
        return f"{smem_bytes(k)} bytes of shared memory > {SMEM_LIMIT}"
    return ""


def render(family: str, k: Mapping, allow_split: bool) -> str:
    defines = {
        "MS_BM": k["bm"],
        "MS_BN": k["bn"],
        "MS_BK": k["bk"],
        "MS_WARPS_M": k["warps_m"],
        "MS_WARPS_N": k["warps_n"],
        "MS_STAGES": k["stages"],
        "MS_KSLICES": k.get("kslices", 1),
        "MS_ALLOW_SPLIT": int(allow_split),
    }
    return cuda_source(f"hgemm-bench family {family}", defines, "mma_sync_gemm.cu")
