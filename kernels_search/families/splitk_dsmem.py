"""``splitk_dsmem``: split-K for few-tile shapes on TMA loads and WGMMA, the K slices of a tile in one thread-block
cluster and summed through distributed shared memory inside the same launch.

Why: on few-tile deep-K shapes the library's best kernels are CUTLASS split-K GEMMs whose slices a second kernel
sums (on 256_256_4096 the reduce kernel is 1.2 us of a 5.5 us call, lab/fewtile/slices-kernel-profile-h200.md);
summing through global memory inside the GEMM lost (lab/fewtile/fused-reduce-h200.md), and CUTLASS's sm90
schedulers cannot put a tile's slices in one cluster. templates/splitk_dsmem.cu does: grid (tiles along M, tiles
along N, slices), a tile's slices one cluster, one warpgroup a CTA with a TMA ring of STAGES stages, the slices'
fp32 tiles summed in rank order through DSMEM. Serves layout tn (A and B both K-contiguous), or with ``nn=1`` layout
nn (B N-contiguous, N a multiple of 8), K a multiple of 8 (TMA row strides). ``swap=1`` computes C^T = B A^T (the
weights along the WGMMA's 64-row side, M <= 32 along its N) for decode shapes.
"""

from __future__ import annotations

from typing import Mapping

from harness.method import SUPPORTED, Support, unsupported
from harness.problem import Problem
from kernels_search import toolchain
from kernels_search.family import DEFAULT_SMS, SMEM_LIMIT, Family, Knob, cuda_source

BK = 64  # k of a TMA stage (128-byte swizzled fp16 rows)


def smem_bytes(k: Mapping) -> int:
    """Dynamic shared memory: the A and B stages, the CTA's fp32 tile as C lays it out (row stride: its columns + 4;
    at bm 256 it reuses the stages' memory, so 16 bytes of its own), the barriers."""
    stages = k["stages"] * (k["bm"] + k["bn"]) * BK * 2
    rows, cols = (k["bn"], k["bm"]) if k["swap"] else (k["bm"], k["bn"])
    part = 16 if k["bm"] == 256 else rows * (cols + 4) * 4
    return stages + part + 16 * k["stages"] + 1024


MAX_ACC_REGISTERS = 128  # fp32 accumulators a thread; more would spill with the main loop's own registers


def acc_registers(k: Mapping) -> int:
    """fp32 accumulator registers a thread of the one warpgroup holds: every chain's (bm x bn) tile over 128 threads."""
    return k["chains"] * k["bm"] * k["bn"] // 128


class SplitKDsmem(Family):
    def check(self, k: Mapping) -> str:
        if smem_bytes(k) > SMEM_LIMIT:
            return f"{smem_bytes(k)} bytes of shared memory > {SMEM_LIMIT}"
        if k["nn"] and not k["swap"] and k["bn"] % 64:
            return f"nn=1 with bn {k['bn']}: B's MN-major tile is a multiple of 64 columns"
        if acc_registers(k) > MAX_ACC_REGISTERS:
            return f"{acc_registers(k)} accumulator registers a thread > {MAX_ACC_REGISTERS} (chains x bm x bn / 128)"
        return ""

    def render(self, k: Mapping) -> str:
        defines = {"SD_BM": k["bm"], "SD_BN": k["bn"], "SD_STAGES": k["stages"], "SD_SWAP": k["swap"],
                   "SD_MMA_PIPE": k["mma_pipe"], "SD_CHAINS": k["chains"], "SD_SUM": k["sum"],
                   "SD_PREFETCH": k["prefetch"], "SD_NN": k["nn"]}
        return cuda_source(f"hgemm-bench family {self.name}", defines, "splitk_dsmem.cu", parts=("cluster_slices.cuh",))

    def extra_flags(self, k: Mapping) -> tuple[str, ...]:
        inc = tuple(f"-I{d}" for d in toolchain.cutlass_include_dirs())
        return (*inc, "--expt-relaxed-constexpr", "-DNDEBUG")

    def extra_key(self, k: Mapping) -> str:
        return f"cutlass {toolchain.cutlass_version()}"

    def supports(self, k: Mapping, problem: Problem) -> Support:
        served = "nn" if k["nn"] else "tn"
        if problem.layout != served:
            return unsupported(f"this splitk_dsmem config serves layout {served} only (nn=1: nn, nn=0: tn)")
        if problem.k % 8:
            return unsupported("splitk_dsmem needs K a multiple of 8 (TMA row strides of 16 bytes)")
        if served == "nn" and problem.n % 8:
            return unsupported("splitk_dsmem nn=1 needs N a multiple of 8 (TMA row strides of 16 bytes)")
        along, name = (problem.m, "M") if k["swap"] else (problem.n, "N")
        if -(-along // k["bn"]) > 65535:
            return unsupported(f"more than 65535 tiles along {name}")
        return SUPPORTED

    def opts(self, k: Mapping, problem: Problem, sms: int = DEFAULT_SMS) -> list[int]:
        return [int(k["splits"])]


FAMILY = SplitKDsmem(
    name="splitk_dsmem",
    # measured on the H200 (run 6dd4a42c7893, lab/fewtile/waves-plan.txt), automatic slices, geomean over the best
    # baseline on the 15 few-tile K >= 2048 study shapes: mma_pipe=1 stages=8 0.944x (128_256_4096 1.22x, 64_512_4096
    # 1.24x, 512_64_4096 1.22x), mma_pipe=1 0.901x, bn=32 stages=8 0.878x; swapped, one per decode row count (M <= 8,
    # <= 16, <= 32), warm against the best baseline: 8_6144_4096 1.07x, 1_3072_3072 1.19x, 16_4096_4096 1.10-1.12x,
    # 32_5120_14336 1.03x (runs 6dd4a42c7893, c8cfb94efaa6)
    # sum=1 on the unswapped presets: mma_pipe=1,stages=8 0.916x against 0.861x on those 15 shapes, side by side on an
    # H100 (run 043fc85248c6, lab/fewtile/sum-h100.md)
    # 64 x 128 tiles on deep K with both sides >= 256: 1.18-1.41x the 64 x 64 preset on 256_256_16384, 256_512_8192,
    # 512_512_16384, 128_1024_16384, 256_2048_12288 (H100, lab/fewtile/widen-plan.txt)
    presets=("mma_pipe=1,stages=8,sum=1", "mma_pipe=1,sum=1", "bn=32,stages=8,sum=1",
             "bn=128,mma_pipe=1,stages=6,sum=1",
             "swap=1,bn=8,mma_pipe=1,stages=8",
             "swap=1,bn=16,mma_pipe=1,stages=8", "swap=1,bn=32,mma_pipe=1,stages=8"),
    knobs=(
        Knob("bm", (64, 128, 256), 64,
             help="tile rows (one warpgroup issues bm / 64 m64 WGMMAs a k-step; swapped: weight rows a CTA)"),
        Knob("bn", (64, 128, 32, 16, 8), 64, help="tile columns (the WGMMA's N; swapped: along M)"),
        Knob("stages", (4, 6, 8, 12, 16), 4,
             help="TMA pipeline stages of (bm + bn) x 64 fp16 (16: all of a K-1024 slice's loads in flight "
                  "at once)"),
        Knob("swap", (0, 1), 0, help="1: C^T = B A^T, bm along N and bn along M (decode shapes, M <= 32)"),
        Knob("mma_pipe", (0, 1), 0, help="1: a stage's WGMMAs in flight while the previous stage is refilled"),
        Knob("chains", (1, 2, 4), 1,
             help="independent accumulator sets a stage's k16 WGMMAs alternate over "
                  "(1: each waits for the one before)"),
        Knob("sum", (0, 1), 0,
             help="1: with >= 4 slices, the slice sum with every rank's DSMEM load in flight, 4 columns a thread "
                  "(0: 8 columns, two ranks at a time)"),
        Knob("prefetch", (0, 1), 0, help="1: the TMA descriptors prefetched on entry"),
        Knob("nn", (0, 1), 0,
             help="1: serves layout nn (B K x N, N-contiguous, an MN-major WGMMA operand) instead of tn"),
        Knob("splits", (0, 1, 2, 4, 8, 16), 0, runtime=True,
             help="K slices, the CTAs of one cluster (0 = tiles x slices about the SM count, at most 8, "
                  "no more than fit at once)"),
    ),
)
